// Property test: a warm PrefixBuilder (fed the earlier bodies first, taking their shared part over in bulk)
// says exactly what a cold one says, for random agent-shaped bodies under random edits, in all three formats.

import { describe, expect, it } from 'vitest';
import { type Prefix, PrefixBuilder } from '../../src/prefix/build-prefix.js';
import { messageEnds } from '../../src/prefix/message-ends.js';
import type { WireFormat } from '../../src/wire/request-body.js';
import {
  type Conversation,
  editConversation,
  growConversation,
  newConversation,
  seededRandom,
  serialize,
} from '../fixtures/fuzz-bodies.js';
import { prefixData } from '../fixtures/prefix-data.js';

/** Everything a prefix says, as plain data, with its message ends. */
function prefixWithEnds(p: Prefix): unknown {
  return { ...prefixData(p), ends: messageEnds(p) };
}

/** A parse's outcome as data: the prefix, or the error's class, code and message. */
function outcome(parse: () => Prefix): unknown {
  try {
    return prefixWithEnds(parse());
  } catch (e) {
    const err = e as Error & { code?: string };
    return { error: err.constructor.name, code: err.code, message: err.message };
  }
}

/** More seeds for a deep run: CACHEWARD_FUZZ_SCALE=50 npx vitest run test/prefix/incremental-fuzz.test.ts */
const SCALE = Math.max(1, Number(process.env.CACHEWARD_FUZZ_SCALE) || 1);

const FORMATS: WireFormat[] = ['anthropic-messages', 'openai-chat', 'openai-responses'];

/**
 * Runs `steps` requests of `parallel` interleaved random conversations through one warm builder and
 * checks each against a cold one. Returns how many failed to parse (so the test knows errors were tried).
 */
function fuzzSession(
  seed: number,
  steps: number,
  parallel: number,
  keep?: { bodies?: number; bytes?: number },
): { errors: number; edits: Set<string> } {
  const r = seededRandom(seed);
  const format = FORMATS[seed % 3] as WireFormat;
  const convs: Conversation[] = Array.from({ length: parallel }, (_, i) => newConversation(r, format, i));
  const warm = new PrefixBuilder(keep ? { keep } : {});
  let errors = 0;
  const edits = new Set<string>();
  const trail: string[] = [];
  for (let s = 0; s < steps; s++) {
    const c = convs[Math.floor(r() * convs.length)] as Conversation;
    const edit = s === 0 ? 'first' : editConversation(r, c);
    const { bytes, edit: wire } = serialize(r, c);
    trail.push(`${c.id}:${edit}/${wire}`);
    edits.add(edit).add(wire);
    // Sometimes the route's format differs from the body's (a body parsed on the wrong route).
    const f = r() < 0.05 ? (FORMATS[(FORMATS.indexOf(format) + 1) % 3] as WireFormat) : format;
    // Betas change the parameters folded into the keys (a client that turns one on mid-session).
    const betas =
      r() < 0.15
        ? ['prompt-caching-scope-2026-01-05', 'extended-cache-ttl-2025-04-11'][Math.floor(r() * 2)]
        : undefined;
    const options = { format: f, ...(betas ? { headers: { 'anthropic-beta': betas } } : {}) };
    const got = outcome(() => warm.parse(bytes, options));
    const want = outcome(() => new PrefixBuilder().parse(bytes, options));
    if ((want as { error?: string }).error) errors++;
    expect(
      got,
      `seed ${seed} step ${s} (${trail.slice(-6).join(' ')}): ${bytes.toString().slice(0, 300)}`,
    ).toEqual(want);
  }
  return { errors, edits };
}

describe('a warm prefix builder says what a cold one says (random bodies, random edits)', () => {
  it('for single conversations in each format', () => {
    let errors = 0;
    const edits = new Set<string>();
    for (let seed = 1; seed <= 40 * SCALE; seed++) {
      const out = fuzzSession(seed, 30, 1);
      errors += out.errors;
      for (const e of out.edits) edits.add(e);
    }
    // The edits the property is meant to cover were all drawn, bad bodies included.
    for (const e of [
      'append',
      'edit-old',
      'move-cache-control',
      'tools',
      'system',
      'reorder-keys',
      'truncate-messages',
      'splice-middle',
      'grow-message',
      'whitespace',
      'duplicate-key',
      'messages-not-array',
      'truncate-bytes',
      'corrupt-byte',
      'escapes',
    ])
      expect(edits).toContain(e);
    expect(errors).toBeGreaterThan(10);
  });

  it('for interleaved conversations, with a small keep bound (kept bodies evicted between requests)', () => {
    for (let seed = 100; seed < 100 + 20 * SCALE; seed++) fuzzSession(seed * 7, 40, 3);
    for (let seed = 200; seed < 200 + 10 * SCALE; seed++)
      fuzzSession(seed * 11, 40, 4, { bodies: 2, bytes: 2_000 });
  });
});

describe('stepped parses interleaved on one warm builder say what a cold builder says', () => {
  it('while other parses keep, supersede and evict the bodies they extend from', () => {
    for (let seed = 300; seed < 300 + 3 * SCALE; seed++) {
      const r = seededRandom(seed);
      const format = FORMATS[seed % 3] as WireFormat;
      const convs = [0, 1].map((i) => newConversation(r, format, i));
      // Long histories, so a parse yields between its steps (every few hundred items).
      for (const c of convs) growConversation(r, c, 320);
      const warm = new PrefixBuilder({ keep: { bodies: 2 + (seed % 2) * 8 } });
      const inflight: Array<{ steps: Generator<void, Prefix>; bytes: Buffer; label: string }> = [];
      let started = 0;
      let yielded = 0;
      while (started < 14 || inflight.length) {
        if (started < 14 && (inflight.length === 0 || r() < 0.4)) {
          const c = convs[Math.floor(r() * convs.length)] as Conversation;
          const edit = editConversation(r, c);
          const { bytes, edit: wire } = serialize(r, c);
          inflight.push({
            steps: warm.parseSteps(bytes, { format }),
            bytes,
            label: `${started}:${edit}/${wire}`,
          });
          started++;
          continue;
        }
        const at = Math.floor(r() * inflight.length);
        const job = inflight[at] as (typeof inflight)[number];
        let done: IteratorResult<void, Prefix> | { error: unknown };
        try {
          done = job.steps.next();
        } catch (error) {
          done = { error };
        }
        if ('done' in done && !done.done) {
          yielded++;
          continue;
        }
        inflight.splice(at, 1);
        const got =
          'error' in done
            ? outcome(() => {
                throw done.error;
              })
            : outcome(() => (done as { value: Prefix }).value);
        const want = outcome(() => new PrefixBuilder().parse(job.bytes, { format }));
        expect(got, `seed ${seed} ${job.label}`).toEqual(want);
      }
      expect(yielded).toBeGreaterThan(0);
    }
  });
});

describe('hand-picked neighbours of the take-over', () => {
  /** Parses `bodies` in order on one warm builder; each must say what a cold builder says. */
  const check = (bodies: string[], format: WireFormat = 'anthropic-messages') => {
    const warm = new PrefixBuilder();
    bodies.forEach((b, i) => {
      const bytes = Buffer.from(b);
      expect(
        outcome(() => warm.parse(bytes, { format })),
        `body ${i}: ${b}`,
      ).toEqual(outcome(() => new PrefixBuilder().parse(bytes, { format })));
    });
  };
  const m = (t: string, role = 'user') => `{"role":"${role}","content":[{"type":"text","text":"${t}"}]}`;
  const head = '"model":"claude-opus-5","max_tokens":8';

  it('shared bytes that end inside a key, a number, or just after an item', () => {
    check([
      `{${head},"messages":[${m('a')},${m('b', 'assistant')}],"metadata":{"user_id":"u"}}`,
      `{${head},"messages":[${m('a')},${m('b', 'assistant')}],"metadatb":{"user_id":"u"}}`,
      `{"model":"claude-opus-5","max_tokens":80,"messages":[${m('a')}]}`,
      `{"model":"claude-opus-5","max_tokens":8,"messages":[${m('a')}]}`,
      `{"model":"claude-opus-5","max_tokens":8e0,"messages":[${m('a')}]}`,
      `{${head},"messages":[${m('a')},${m('b', 'assistant')}]}`,
      `{${head},"messages":[${m('a')},${m('b', 'assistant')}] }`,
      `{${head},"messages":[${m('a')},${m('b', 'assistant')} ]}`,
      `{${head},"messages":[${m('a')},${m('b', 'assistant')}],"system":"s"}`,
    ]);
  });

  it('items that are not messages, null members, and a body that is a byte prefix of its base', () => {
    const full = `{${head},"system":"s","tools":null,"messages":[${m('a')},${m('b', 'assistant')},${m('c')}]}`;
    check([
      full,
      full.slice(0, full.length - 40),
      `{${head},"system":null,"tools":null,"messages":[${m('a')},${m('b', 'assistant')},${m('c')}]}`,
      `{${head},"system":"s","tools":null,"messages":[${m('a')},${m('b', 'assistant')},12]}`,
      `{${head},"system":"s","tools":null,"messages":[${m('a')},${m('b', 'assistant')},123]}`,
      full,
      `{${head},"system":"s","tools":null,"messages":[${m('a')},${m('b', 'assistant')},${m('c')},${m('d', 'assistant')}]}`,
    ]);
  });

  it('duplicate messages members, either one at the place of the base', () => {
    const [a, b, c, d] = [m('a'), m('b', 'assistant'), m('c'), m('d', 'assistant')];
    check([
      `{${head},"messages":[${a},${b},${c}]}`,
      `{${head},"messages":[${a},${b}],"messages":[${d}]}`,
      `{${head},"messages":[${a}],"messages":[${b},${c}]}`,
      `{${head},"messages":[${a}],"messages":[${b},${d}]}`,
      `{${head},"messages":[${a}],"messages":[${b},${d},${c}]}`,
      `{${head},"messages":[${a},${b},${d},${c}]}`,
    ]);
  });

  it('a chat body read on the Anthropic route after the same body on its own, and back', () => {
    const chat = (n: number) =>
      JSON.stringify({
        model: 'gpt-5',
        messages: Array.from({ length: n }, (_, i) => ({
          role: i % 2 ? 'assistant' : 'user',
          content: `t${i}`,
        })),
      });
    const warm = new PrefixBuilder();
    for (const [n, format] of [
      [3, 'openai-chat'],
      [4, 'anthropic-messages'],
      [5, 'openai-chat'],
      [6, 'openai-responses'],
      [7, 'openai-chat'],
    ] as const) {
      const bytes = Buffer.from(chat(n));
      expect(outcome(() => warm.parse(bytes, { format }))).toEqual(
        outcome(() => new PrefixBuilder().parse(bytes, { format })),
      );
    }
  });
});
