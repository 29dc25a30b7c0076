// The unit memo stays within its bound, evicts the oldest first and keeps the newest units.
// Pure: no clock, no I/O.

import { describe, expect, it } from 'vitest';
import { PrefixBuilder } from './build-prefix.js';

/** A Responses body of messages `from`…`to - 1`, each a distinct one-line unit. */
function body(from: number, to: number): string {
  const input = [];
  for (let i = from; i < to; i++) input.push({ role: i % 2 ? 'assistant' : 'user', content: `message ${i}` });
  return JSON.stringify({ model: 'gpt-5.4', input });
}

describe('UnitReader memo (issue 14: 300k messages took 21.9 s)', () => {
  // Evicting one entry at a time from the head of a Map walks every slot deleted before it (V8 keeps
  // them until a rehash), so a body with more new units than the bound cost O(bound) per unit. Eviction
  // now drops the oldest tenth at once: amortized O(1). `npm run bench:sim` measures 300k messages.
  it('evicts the oldest tenth at once when full, and stays within its bound', () => {
    const b = new PrefixBuilder({ memoEntries: 1000 });
    b.parse(body(0, 1000), { format: 'openai-responses' });
    expect(b.units.memoSize()).toEqual({ size: 1000, limit: 1000 });
    b.parse(body(0, 1001), { format: 'openai-responses' });
    // Full at the 1,001st new unit: the oldest 100 went in one batch, then it was added.
    expect(b.units.memoSize().size).toBe(901);
    expect(b.units.stats.evicted).toBe(100);
    b.parse(body(0, 5050), { format: 'openai-responses' });
    expect(b.units.memoSize().size).toBeLessThanOrEqual(1000);
    expect(b.units.memoSize().size).toBeGreaterThanOrEqual(900);
  });

  it('is bounded by default at 50,000 units (about 10 MB), the most a long-running proxy holds', () => {
    // The eviction itself is the test above, at a bound of 1,000.
    expect(new PrefixBuilder().units.memoSize()).toEqual({ size: 0, limit: 50_000 });
  });

  it('keeps the newest units: re-reading the tail computes nothing new', () => {
    const b = new PrefixBuilder({ memoEntries: 1000 });
    b.parse(body(0, 5000), { format: 'openai-responses' });
    const before = b.units.stats.computed;
    b.parse(body(4200, 5000), { format: 'openai-responses' });
    expect(b.units.stats.computed - before).toBe(0);
  });
});
