// The cache model's entry store stays within its bounds however long it runs, and forgets the oldest first.
// Pure: times are parameters, nothing is read from a clock.

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

  it('forgets the oldest remembered first, within its own bound', () => {
    const store = new EntryStore({ maxExpired: 50 });
    for (let i = 0; i < 3_000; i++) {
      const now = T0 + i * 1_000;
      store.sweep(now);
      store.write(`k${i}`, 1_000, TTL, now, `r${i}`, now);
    }
    // Long after: every entry has expired and been swept.
    const end = T0 + 3_000 * 1_000 + 3 * TTL;
    store.sweep(end);
    expect(store.sizes()).toEqual({ entries: 0, expired: 50 });
    // The 50 that expired last, and none before them.
    for (let i = 2_950; i < 3_000; i++) expect(store.expired(`k${i}`, end)?.writer).toBe(`r${i}`);
    expect(store.expired('k2949', end)).toBeUndefined();
  });

  it('an entry written again after it expired is live, and is remembered anew when it expires again', () => {
    const store = new EntryStore({ maxExpired: 5 });
    for (let i = 0; i < 5; i++) store.write(`k${i}`, 1_000, TTL, T0, `r${i}`, T0);
    let now = T0 + 2 * TTL;
    store.sweep(now);
    expect(store.sizes().expired).toBe(5);
    store.write('k2', 1_000, TTL, now, 'again', now);
    expect(store.expired('k2', now)).toBeUndefined();
    expect(store.sizes().expired).toBe(4);
    // Two more expire: the bound forgets the oldest remembered (k0), not the one written again.
    store.write('k5', 1_000, TTL, now, 'r5', now);
    now += 2 * TTL;
    store.sweep(now);
    expect(store.sizes().expired).toBe(5);
    expect(store.expired('k2', now)?.writer).toBe('again');
    expect(store.expired('k0', now)).toBeUndefined();
    expect(store.expired('k1', now)?.writer).toBe('r1');
  });
});
