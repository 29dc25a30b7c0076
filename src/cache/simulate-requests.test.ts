// simulateRequests: what each request read and wrote, concurrency, refusals and the evidence of a miss; each
// result a snapshot that later requests do not change.
// Pure: prefixes and times in, usage out; no clock, no HTTP.

import { describe, expect, it } from 'vitest';
import { filler, messagesBody } from '../../test/sim/helpers.js';
import { parsePrefix } from '../prefix/build-prefix.js';
import { simulateRequests } from './simulate-requests.js';

const prefix = (
  n: number,
  marks: Record<number, Record<string, unknown>> = { [n - 1]: { type: 'ephemeral' } },
) => parsePrefix(JSON.stringify(messagesBody(n, 200, marks)), { format: 'anthropic-messages' });

describe('simulateRequests', () => {
  it('answers what each request read and wrote, as a plain function of prefixes and times', () => {
    const t0 = 1_000_000;
    const [a, b, c] = simulateRequests([
      { prefix: prefix(3), scope: 's', start: t0, firstByte: t0 + 500 },
      { prefix: prefix(5), scope: 's', start: t0 + 60_000, firstByte: t0 + 60_500 },
      { prefix: prefix(5), scope: 's', start: t0 + 60_000 + 5 * 60_000 + 1 },
    ]);
    expect(a?.provider === 'anthropic' && 'result' in a && a.result.usage.cache_read_input_tokens).toBe(0);
    if (!b || !('result' in b) || b.provider !== 'anthropic') throw new Error('expected a result');
    expect(b.result.hit?.blockIndex).toBe(2);
    if (!c || !('result' in c) || c.provider !== 'anthropic') throw new Error('expected a result');
    expect(c.result.hit).toBeNull();
  });

  it('makes overlapping requests both miss, and a request after the first byte hit', () => {
    const t0 = 5_000_000;
    const results = simulateRequests([
      { prefix: prefix(3), scope: 's', start: t0, firstByte: t0 + 2_000 },
      { prefix: prefix(3), scope: 's', start: t0 + 1_000, firstByte: t0 + 3_000 },
      { prefix: prefix(3), scope: 's', start: t0 + 2_000 },
    ]);
    const hits = results.map((r) => (r && 'result' in r ? r.result.hit !== null : undefined));
    expect(hits).toEqual([false, false, true]);
  });

  it('reports a 400 instead of a result for a request the provider would reject', () => {
    const five = {
      0: { type: 'ephemeral' },
      1: { type: 'ephemeral' },
      2: { type: 'ephemeral' },
      3: { type: 'ephemeral' },
      4: { type: 'ephemeral' },
    };
    const [r] = simulateRequests([{ prefix: prefix(6, five), scope: 's', start: 0 }]);
    expect(r && 'rejected' in r && r.rejected.status).toBe(400);
  });

  it('explains a miss whose entry sits beyond the lookback window', () => {
    const marks = (i: number) => ({ [i]: { type: 'ephemeral' } });
    const p = (n: number, i: number) =>
      parsePrefix(JSON.stringify(messagesBody(n, 60, marks(i))), { format: 'anthropic-messages' });
    const results = simulateRequests(
      [
        { prefix: p(16, 15), scope: 's', start: 0 },
        { prefix: p(37, 35), scope: 's', start: 1000 },
      ],
      { explain: true },
    );
    const second = results[1];
    if (!second || !('result' in second) || second.provider !== 'anthropic')
      throw new Error('expected a result');
    expect(second.result.hit).toBeNull();
    expect(second.result.beyondLookback?.blockIndex).toBe(15);
  });

  it("keeps each result a snapshot: a later request's read does not change what an earlier one wrote", () => {
    // docs/library.md's example: the second request, a minute later, reads and refreshes the first's entry.
    const p = prefix(3);
    const [alone] = simulateRequests([{ prefix: p, scope: 'key-1', start: 0, firstByte: 800 }]);
    const [first, second] = simulateRequests([
      { prefix: p, scope: 'key-1', start: 0, firstByte: 800 },
      { prefix: p, scope: 'key-1', start: 60_000 },
    ]);
    if (!first || !('result' in first) || !alone || !('result' in alone)) throw new Error('expected results');
    if (!second || !('result' in second) || second.provider !== 'anthropic')
      throw new Error('expected a result');
    expect(second.result.hit).not.toBeNull();
    expect(first.result.writes[0]?.expiresAt).toBe(300_000);
    expect(first.result.writes[0]?.readableAt).toBe(800);
    expect(first).toEqual(alone);
  });

  it('keeps OpenAI results snapshots too', () => {
    const p = parsePrefix(
      JSON.stringify({ model: 'gpt-5.4', messages: [{ role: 'user', content: filler(3_000) }] }),
      { format: 'openai-chat' },
    );
    const req = {
      prefix: p,
      scope: 'key-1',
      start: 0,
      firstByte: 800,
      openai: { retention: '24h' as const },
    };
    const [alone] = simulateRequests([req]);
    const [first, second] = simulateRequests([req, { ...req, start: 60_000, firstByte: 60_800 }]);
    if (!second || !('result' in second) || second.provider !== 'openai')
      throw new Error('expected a result');
    expect(second.result.hit).not.toBeNull();
    if (!first || !('result' in first) || first.provider !== 'openai') throw new Error('expected a result');
    expect(first.result.writes.length).toBeGreaterThan(0);
    expect(first).toEqual(alone);
  });
});
