// Stepped JSON with sha1 writes exactly JSON.stringify's text, and fix state is kept in pieces.
// In-process: no file, no Redis.

import { hash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { drainSteps, STEP_ITEMS } from '../core/steps.js';
import { FixStateStore } from './fix-state-store.js';
import { jsonAndSha1Steps } from './json-steps.js';

/** Runs a stepped computation, counting its pieces. */
function pieces<T>(steps: Generator<void, T>): { value: T; pieces: number } {
  let n = 0;
  for (;;) {
    const r = steps.next();
    n++;
    if (r.done) return { value: r.value, pieces: n };
  }
}

class Point {
  constructor(
    readonly x: number,
    readonly y: number,
  ) {}
}

describe('jsonAndSha1Steps', () => {
  const long = Array.from({ length: 3 * STEP_ITEMS + 7 }, (_, i) => ({
    role: i % 2 ? 'assistant' : 'user',
    string: i % 3 === 0,
    ids: [`id-${i}`, 'é🔥\u2028"\\'],
  }));
  const values: unknown[] = [
    { messages: long },
    {
      frozen: null,
      added: [],
      removed: ['a'],
      announcements: [{ at: 3, blocks: [{ type: 'x' }] }],
      warned: [],
    },
    { skip: undefined, fn: () => 1, list: [...long, undefined, () => 2, Symbol('s')], n: 1.5, s: 'x' },
    { 2: 'int key first', b: long, 1: 'one' },
    { toJSON: () => ({ replaced: true }), messages: long },
    new Point(1, 2),
    [1, 2, 3],
    'text',
    null,
    undefined,
    Object.assign(Object.create(null), { messages: long }),
  ];

  it('writes exactly what JSON.stringify writes, with its sha1', () => {
    for (const v of values) {
      const text = JSON.stringify(v) ?? 'null';
      expect(drainSteps(jsonAndSha1Steps(v))).toEqual({ json: text, sha1: hash('sha1', text, 'hex') });
    }
  });

  it('with an element cache: the same text and sha1, and each element object written once', () => {
    const elements = new WeakMap<object, string>();
    for (const v of values) {
      const text = JSON.stringify(v) ?? 'null';
      expect(drainSteps(jsonAndSha1Steps(v, elements))).toEqual({
        json: text,
        sha1: hash('sha1', text, 'hex'),
      });
    }
    // The next state of a conversation: its earlier messages are the same objects, one message more.
    let reads = 0;
    const counted = long.map((m) => ({
      get role() {
        reads++;
        return m.role;
      },
      string: m.string,
      ids: m.ids,
    }));
    const first = { messages: counted };
    const next = { messages: [...counted, { role: 'user', string: false, ids: ['new'] }] };
    const firstText = JSON.stringify(first);
    const text = JSON.stringify(next);
    reads = 0;
    expect(drainSteps(jsonAndSha1Steps(first, elements)).json).toBe(firstText);
    expect(reads).toBe(long.length);
    reads = 0;
    expect(drainSteps(jsonAndSha1Steps(next, elements))).toEqual({
      json: text,
      sha1: hash('sha1', text, 'hex'),
    });
    expect(reads).toBe(0);
  });

  it('writes a long history in pieces of a few hundred elements', () => {
    expect(pieces(jsonAndSha1Steps({ messages: long })).pieces).toBeGreaterThanOrEqual(4);
    expect(pieces(jsonAndSha1Steps({ messages: long.slice(0, 10) })).pieces).toBe(1);
  });
});

describe('FixStateStore.setSteps', () => {
  it('keeps the states at once, and their shared copy (equal) once done; in pieces for a long history', () => {
    const store = new FixStateStore();
    const big = {
      messages: Array.from({ length: 2 * STEP_ITEMS }, (_, i) => ({ text: 'x'.repeat(300), i })),
    };
    // Another conversation's state holding an equal element: the shared copy is that one's.
    store.set('other', new Map([['pin', { messages: [{ text: 'x'.repeat(300), i: 0 }] }]]));
    const steps = store.setSteps('r1', new Map([['pin', big]]));
    steps.next();
    expect(store.get('r1')?.get('pin')).toBe(big);
    const { pieces: n } = pieces(steps);
    expect(n).toBeGreaterThan(1);
    const shared = store.get('r1')?.get('pin') as typeof big;
    expect(shared).toEqual(big);
    const other = store.get('other')?.get('pin') as typeof big | undefined;
    expect(shared.messages[0]).toBe(other?.messages[0]);
    // Forgotten while its copy was being made: it stays forgotten.
    const again = store.setSteps('r2', new Map([['pin', big]]));
    again.next();
    store.delete('r2');
    drainSteps(again);
    expect(store.get('r2')).toBeUndefined();
  });
});
