// Records waiting in the reorder window share their session's latest block array, and each gets exactly
// its own blocks back as it leaves: next turns (the marker moved off the last block), a rewind, and two
// sessions interleaved, leaving in an order other than they came.
import { describe, expect, it } from 'vitest';
import type { CapturedBlock, CaptureRecord } from '../record/capture-record.js';
import { type Waiting, WaitingBlocks } from './waiting-blocks.js';

const block = (id: string): CapturedBlock => ({
  level: 'messages',
  kind: 'text',
  id,
  hash: `h-${id}`,
  index: 0,
  at: 0,
  size: 1,
  tokens: 1,
});

const record = (id: string, session: string, blocks: CapturedBlock[]): CaptureRecord =>
  ({
    v: 1,
    id,
    session: { key: session, source: 'header' },
    times: { start: 0 },
    prefix: { format: 'anthropic-messages', totalTokens: blocks.length, blocks, params: {} },
  }) as unknown as CaptureRecord;

describe('WaitingBlocks', () => {
  it('gives every record its own blocks back, whatever joined the window after it', () => {
    const waiting = new WaitingBlocks();
    const a = [block('a0'), block('a1')];
    // Each turn keeps the earlier blocks' objects but for the last one (its marker moved: a new object).
    const turns: CapturedBlock[][] = [a];
    for (let t = 2; t < 7; t++) {
      const prev = turns[turns.length - 1] as CapturedBlock[];
      turns.push([...prev.slice(0, -1), { ...(prev[prev.length - 1] as CapturedBlock) }, block(`a${t}`)]);
    }
    // A rewind: shares only the first block with the last turn.
    const last = turns[turns.length - 1] as CapturedBlock[];
    turns.push([last[0] as CapturedBlock, block('r1')]);
    const other = [block('b0')];
    const others = [other, [other[0] as CapturedBlock, block('b1')]];
    const records = [
      ...turns.map((b, i) => record(`a${i}`, 'A', b)),
      ...others.map((b, i) => record(`b${i}`, 'B', b)),
    ];
    const order = [0, 7, 1, 8, 2, 3, 4, 5, 6];
    const expected = new Map(records.map((r) => [r, [...(r.prefix?.blocks ?? [])]]));
    const held = new Map(order.map((i) => [i, waiting.arrive(records[i] as CaptureRecord)]));
    // Most records no longer hold an array of their own while they wait.
    const arrays = new Set(records.map((r) => r.prefix?.blocks));
    expect(arrays.size).toBeLessThan(records.length);
    for (const i of [3, 8, 0, 6, 1, 5, 7, 2, 4]) {
      const r = waiting.leave(held.get(i) as Waiting);
      expect(r).toBe(records[i]);
      const blocks = r.prefix?.blocks ?? [];
      const want = expected.get(r) ?? [];
      expect(blocks.length).toBe(want.length);
      for (let k = 0; k < want.length; k++) expect(blocks[k]).toBe(want[k]);
    }
  });

  it("shares a Claude Code session's array past its moved blocks, and gives each its own back", () => {
    const waiting = new WaitingBlocks();
    // As the reader makes them: the moved tools get objects of their own, the messages are the base's.
    const tools = [block('t0'), block('t1')].map(
      (b): CapturedBlock => ({ ...b, level: 'tools', kind: 'tool' }),
    );
    const messages = Array.from({ length: 8 }, (_, i) => block(`m${i}`));
    const first = [...tools, ...messages];
    const second = [...tools.map((b) => ({ ...b, at: b.at + 40 })), ...messages, block('m8')];
    const r1 = record('r1', 'S', first);
    const r2 = record('r2', 'S', second);
    const third = [...tools.map((b) => ({ ...b, at: b.at + 80 })), ...messages, block('m8'), block('m9')];
    const r3 = record('r3', 'S', third);
    const w1 = waiting.arrive(r1);
    const w2 = waiting.arrive(r2);
    waiting.arrive(r3);
    // While they wait, the earlier two hold no array of their own: only their moved tools.
    expect(r1.prefix?.blocks.length).toBe(0);
    expect(r2.prefix?.blocks.length).toBe(0);
    for (const [w, want] of [
      [w2, second],
      [w1, first],
    ] as const) {
      const back = waiting.leave(w).prefix?.blocks ?? [];
      expect(back.length).toBe(want.length);
      for (let k = 0; k < want.length; k++) expect(back[k]).toBe(want[k]);
    }
  });
});
