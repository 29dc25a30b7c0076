// ExpiringRecords against a plain reference (a Map whose first key goes past the bound) on random sets and
// clears: the same records kept, the same ones dropped, over many drops (its kept iterator is not fooled).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ExpiringRecords } from './expiring-records.js';

type Op = { op: 'set'; k: string; v: number; now: number } | { op: 'clear' };

const op: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 20,
    arbitrary: fc.record({
      op: fc.constant('set' as const),
      k: fc.constantFrom(...'abcdefgh'),
      v: fc.nat(),
      now: fc.nat(50),
    }),
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('clear' as const) }) },
);

describe('ExpiringRecords', () => {
  it('keeps and drops the records a first-key-goes map would, and expires them by time', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 4 }), fc.array(op, { maxLength: 120 }), (max, ops) => {
        const records = new ExpiringRecords<number>(10, max);
        const ref = new Map<string, { v: number; until: number }>();
        for (const o of ops) {
          if (o.op === 'clear') {
            records.clear();
            ref.clear();
            continue;
          }
          records.set(o.k, o.v, o.now);
          ref.set(o.k, { v: o.v, until: o.now + 10 });
          if (ref.size > max) ref.delete(ref.keys().next().value as string);
          for (const k of 'abcdefgh') {
            const r = ref.get(k);
            expect(records.get(k, o.now)).toBe(r && r.until > o.now ? r.v : undefined);
          }
        }
      }),
      { numRuns: 500 },
    );
  });
});
