import { describe, expect, it } from 'vitest';
import { EntryStore } from './entry-store.js';

const T0 = Date.UTC(2026, 11, 1);
const TTL = 5 * 60_000;

describe('EntryStore stays within its bound when it runs for ever', () => {
  it('remembers at most a quarter of its bound of expired entries, the latest ones', () => {
    const store = new EntryStore({ maxEntries: 400 });
    // 4,000 entries written a second apart, each expiring 5 minutes later: most of them expire and are swept.
    for (let i = 0; i < 4_000; i++) {
      const now = T0 + i * 1_000;
      store.sweep(now);
      store.write(`k${i}`, 1_000, TTL, now, `r${i}`, now);
    }
    const end = T0 + 4_000 * 1_000;
    store.sweep(end);
    const sizes = store.sizes();
    expect(sizes.entries).toBeLessThanOrEqual(400);
    // Without the quarter it kept 400 expired entries beside 400 live ones: twice the bound.
    expect(sizes.expired).toBeLessThanOrEqual(100);
    // The newest expired entry is still named (what a miss lost, with its TTL); the oldest are forgotten.
    const newest = 4_000 - TTL / 1_000 - 61;
    expect(store.expired(`k${newest}`, end)?.ttlMs).toBe(TTL);
    expect(store.expired('k0', end)).toBeUndefined();
  });
});
