// LruMap against a plain reference (an array of keys, youngest last) on random gets, sets, deletes and
// prunes: the same values, the same order, the same evictions, whatever key was touched last.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { LruMap } from './lru-map.js';

type Op =
  | { op: 'get'; k: string }
  | { op: 'set'; k: string; v: number; exp?: number }
  | { op: 'delete'; k: string }
  | { op: 'prune'; now: number };

/** Operations on keys from `key`; `sets` weighs writes against each other kind (more: the map fills). */
const ops = (key: fc.Arbitrary<string>, sets: number): fc.Arbitrary<Op> =>
  fc.oneof(
    fc.record({ op: fc.constant('get' as const), k: key }),
    {
      weight: sets,
      arbitrary: fc.record(
        { op: fc.constant('set' as const), k: key, v: fc.nat(), exp: fc.nat(20) },
        { requiredKeys: ['op', 'k', 'v'] },
      ),
    },
    fc.record({ op: fc.constant('delete' as const), k: key }),
    fc.record({ op: fc.constant('prune' as const), now: fc.nat(20) }),
  );

/** The map against the reference for any `max` and sequence of operations on keys from `key`. */
function matchesReference(
  maxCap: number,
  key: fc.Arbitrary<string>,
  maxLength: number,
  numRuns: number,
  sets = 1,
): void {
  fc.assert(
    fc.property(fc.integer({ min: 1, max: maxCap }), fc.array(ops(key, sets), { maxLength }), (max, ops) => {
      const lru = new LruMap<number>(max);
      const order: string[] = [];
      const values = new Map<string, number>();
      const expiry = new Map<string, number>();
      const drop = (k: string) => {
        order.splice(order.indexOf(k), 1);
        values.delete(k);
        expiry.delete(k);
      };
      for (const o of ops) {
        if (o.op === 'get') {
          const want = values.get(o.k);
          if (want !== undefined) {
            order.splice(order.indexOf(o.k), 1);
            order.push(o.k);
          }
          expect(lru.get(o.k)).toBe(want);
        } else if (o.op === 'set') {
          if (values.has(o.k)) order.splice(order.indexOf(o.k), 1);
          order.push(o.k);
          values.set(o.k, o.v);
          if (o.exp !== undefined) expiry.set(o.k, o.exp);
          else expiry.delete(o.k);
          while (order.length > max) drop(order[0] as string);
          lru.set(o.k, o.v, o.exp);
        } else if (o.op === 'delete') {
          if (values.has(o.k)) drop(o.k);
          lru.delete(o.k);
        } else {
          // The reference prunes like the map: from the oldest, past at most 32 live entries (all here).
          for (const k of [...order]) {
            const e = expiry.get(k);
            if (e !== undefined && e <= o.now) drop(k);
          }
          lru.prune(o.now);
        }
        expect([...lru.entries()]).toEqual(order.map((k) => [k, values.get(k)]));
        expect(lru.first()).toEqual(order.length ? [order[0], values.get(order[0] as string)] : undefined);
      }
    }),
    { numRuns },
  );
}

describe('LruMap', () => {
  it('keeps the order and evictions of a reference LRU for any sequence of operations', () => {
    matchesReference(4, fc.constantFrom('a', 'b', 'c', 'd', 'e', 'f'), 60, 500);
  });

  it('does so too past its first slots (they grow, and freed ones are taken again)', () => {
    matchesReference(30, fc.integer({ min: 0, max: 39 }).map(String), 300, 150, 6);
  });

  it('keeps every expiry and value as its slots grow, and takes freed slots again', () => {
    const evicted: string[] = [];
    const lru = new LruMap<number>(100, (k) => evicted.push(k));
    for (let i = 0; i < 100; i++) lru.set(`k${i}`, i, i % 2 ? 1_000 + i : undefined);
    lru.get('k0');
    expect(lru.prune(999)).toBe(0);
    // Every odd key had expired by 1,060 up to k59: 30 of them (the listener hears of each).
    expect(lru.prune(1_060, 1_000)).toBe(30);
    expect(evicted).toHaveLength(30);
    expect(lru.size).toBe(70);
    for (let i = 100; i < 130; i++) lru.set(`k${i}`, i);
    expect(lru.size).toBe(100);
    expect(lru.first()).toEqual(['k2', 2]);
    expect([...lru.values()].slice(-3)).toEqual([127, 128, 129]);
    expect(lru.peek('k0')).toBe(0);
  });

  it('keeps an expired entry a listener set again while prune dropped the ones before it', () => {
    const lru: LruMap<number> = new LruMap<number>(10, (k) => {
      // The listener gives b a new life as a drops.
      if (k === 'a') lru.set('b', 20);
    });
    lru.set('a', 1, 5);
    lru.set('b', 2, 5);
    expect(lru.prune(6)).toBe(1);
    expect(lru.peek('a')).toBeUndefined();
    expect(lru.peek('b')).toBe(20);
  });
});
