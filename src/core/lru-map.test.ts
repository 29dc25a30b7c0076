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

const key = fc.constantFrom('a', 'b', 'c', 'd', 'e', 'f');
const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ op: fc.constant('get' as const), k: key }),
  fc.record(
    { op: fc.constant('set' as const), k: key, v: fc.nat(), exp: fc.nat(20) },
    { requiredKeys: ['op', 'k', 'v'] },
  ),
  fc.record({ op: fc.constant('delete' as const), k: key }),
  fc.record({ op: fc.constant('prune' as const), now: fc.nat(20) }),
);

describe('LruMap', () => {
  it('keeps the order and evictions of a reference LRU for any sequence of operations', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 4 }), fc.array(op, { maxLength: 60 }), (max, ops) => {
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
      { numRuns: 500 },
    );
  });
});
