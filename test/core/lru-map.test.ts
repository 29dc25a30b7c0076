import { describe, expect, it } from 'vitest';
import { LruMap } from '../../src/core/lru-map.js';

describe('LruMap prune', () => {
  it('drops exactly the entries whose expiry has passed, however often it is asked', () => {
    const m = new LruMap<number>(1_000);
    for (let i = 0; i < 100; i++) m.set(`k${i}`, i, 1_000 + i * 10);
    m.set('forever', -1);
    expect(m.prune(999)).toBe(0);
    expect(m.prune(1_000)).toBe(1);
    expect(m.prune(1_000)).toBe(0);
    expect(m.prune(1_095)).toBe(9);
    // A later write with an earlier expiry is still found (at the young end: a patient walk reaches it).
    m.set('soon', 0, 1_096);
    expect(m.prune(1_096, 1_000)).toBe(1);
    expect(m.size).toBe(91);
    // Re-setting without an expiry keeps the key for good.
    m.set('k50', 50);
    expect(m.prune(10_000, 1_000)).toBe(89);
    expect([...m.entries()].map(([k]) => k).sort()).toEqual(['forever', 'k50']);
  });

  it('looks past at most `patience` live entries per call, and finds the rest on later calls', () => {
    const m = new LruMap<number>(1_000);
    for (let i = 0; i < 50; i++) m.set(`long${i}`, i, 1e9);
    for (let i = 0; i < 10; i++) m.set(`short${i}`, i, 100);
    expect(m.prune(200, 8)).toBe(0);
    // Once the long-lived ones were touched (moved to the young end), the short ones are at the old end.
    for (let i = 0; i < 50; i++) m.get(`long${i}`);
    expect(m.prune(200, 8)).toBe(10);
    expect(m.size).toBe(50);
  });
});
