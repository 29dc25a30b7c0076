// extendMessageEnds against messageEnds on random request pairs (appended turns, edits, rewinds, leading
// system messages, multi-block messages): reusing an earlier request's ends never changes the answer.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parsePrefix } from './build-prefix.js';
import { extendMessageEnds, messageEnds } from './message-ends.js';

type Msg = { role: string; content: Array<{ type: 'text'; text: string }> };
const message = fc.record({
  role: fc.constantFrom('user', 'assistant', 'system'),
  content: fc.array(
    fc.constantFrom('a', 'b', 'c', 'd').map((text) => ({ type: 'text' as const, text })),
    { minLength: 1, maxLength: 3 },
  ),
});
const body = (messages: Msg[]) =>
  parsePrefix(JSON.stringify({ model: 'gpt-5.4', messages }), { format: 'openai-chat' });

/** How many leading blocks two prefixes have alike (what the analyzer shares between delta records). */
function sharedBlocks(a: ReturnType<typeof body>, b: ReturnType<typeof body>): number {
  let n = 0;
  while (
    n < a.blocks.length &&
    n < b.blocks.length &&
    JSON.stringify(a.blocks[n]) === JSON.stringify(b.blocks[n])
  )
    n++;
  return n;
}

describe('extendMessageEnds', () => {
  it('equals messageEnds for any earlier request and any shared count up to the real one', () => {
    fc.assert(
      fc.property(
        fc.array(message, { maxLength: 8 }),
        fc.array(message, { maxLength: 4 }),
        fc.array(message, { maxLength: 4 }),
        fc.nat(12),
        (common, restA, restB, cut) => {
          const a = body([...common, ...restA]);
          const b = body([...common, ...restB]);
          const expected = messageEnds(b);
          const shared = Math.min(cut, sharedBlocks(a, b));
          const ends = extendMessageEnds(b, messageEnds(a), shared);
          expect(ends).toEqual(expected);
        },
      ),
      { numRuns: 400 },
    );
  });

  it('keeps the earlier end objects it can and cuts the array in place', () => {
    const turns: Msg[] = [
      { role: 'user', content: [{ type: 'text', text: 'one' }] },
      { role: 'assistant', content: [{ type: 'text', text: 'two' }] },
    ];
    const a = body(turns);
    const b = body([...turns, { role: 'user', content: [{ type: 'text', text: 'three' }] }]);
    const before = messageEnds(a);
    const first = before[0];
    const out = extendMessageEnds(b, before, a.blocks.length);
    expect(out).toBe(before);
    expect(out[0]).toBe(first);
    expect(out).toEqual(messageEnds(b));
  });
});
