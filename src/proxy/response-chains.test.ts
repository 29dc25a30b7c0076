// The proxy's chain memory: a chained request made whole as its resent bytes would be, opaque blocks where
// it saw nothing, store: false kept out, and the bounds held. Identities only: nothing it holds is text.

import { inspect } from 'node:util';
import { describe, expect, it } from 'vitest';
import { PrefixBuilder } from '../prefix/build-prefix.js';
import { chainPrefix } from '../prefix/chained-prefix.js';
import { ResponseChains } from './response-chains.js';

const b = new PrefixBuilder();
const parse = (body: object) => b.parse(JSON.stringify(body), { format: 'openai-responses' });
const out = (text: string) => [
  { type: 'message', id: `m_${text}`, role: 'assistant', content: [{ type: 'output_text', text }] },
];

describe('ResponseChains (the proxy keeps identities of chained context, never text)', () => {
  it('makes a chained request whole, as the resent bytes would be; the same again on its result', () => {
    const chains = new ResponseChains();
    const first = parse({ model: 'gpt-5.4', instructions: 'x', input: 'a-secret-question' });
    expect(chains.whole(first)).toEqual({ prefix: first });
    chains.remember(first, 'resp_1', out('a'), 3);
    const second = parse({
      model: 'gpt-5.4',
      instructions: 'x',
      previous_response_id: 'resp_1',
      input: 'two',
    });
    const whole = chains.whole(second);
    expect(whole.chain).toEqual({ previous: 'resp_1', context: 'known' });
    expect(whole.prefix.blocks.map((x) => x.hash)).toEqual(
      chainPrefix(b, first, out('a'), second).blocks.map((x) => x.hash),
    );
    expect(chains.whole(whole.prefix)).toBe(whole);
    // Nothing it holds is text: its whole state, looked into to the bottom, has identities and no words.
    const held = inspect(chains, { depth: Number.POSITIVE_INFINITY, maxArrayLength: null });
    expect(held).toContain(first.blocks[first.blocks.length - 1]?.contentHash);
    expect(held).not.toContain('a-secret-question');
    expect(held).not.toContain('m_a');
    expect(held).not.toContain(Buffer.from('a-secret').toString('hex').slice(0, 16));
    expect(held).not.toMatch(/<Buffer/);
  });

  it('an output it did not see, or a response it never saw, stands as a block sized from usage', () => {
    const chains = new ResponseChains();
    const first = parse({ model: 'gpt-5.4', input: 'one' });
    chains.remember(first, 'resp_1', undefined, 321);
    const second = parse({ model: 'gpt-5.4', previous_response_id: 'resp_1', input: 'two' });
    const w2 = chains.whole(second);
    expect(w2.chain?.context).toBe('output_unknown');
    expect(w2.prefix.totalTokens).toBe(first.totalTokens + 321 + second.totalTokens);
    chains.remember(second, 'resp_2', out('b'), 1);
    expect(
      chains.whole(parse({ model: 'gpt-5.4', previous_response_id: 'resp_2', input: 'c' })).chain,
    ).toEqual({
      previous: 'resp_2',
      context: 'output_unknown',
    });
    const stranger = parse({ model: 'gpt-5.4', previous_response_id: 'resp_gone', input: 'two' });
    const w = chains.whole(stranger, 5000);
    expect(w.chain).toEqual({ previous: 'resp_gone', context: 'unknown' });
    expect(w.prefix.totalTokens).toBe(5000);
  });

  it('keeps nothing for store: false, and stays within its bounds', () => {
    const chains = new ResponseChains({ maxResponses: 3, maxBlocks: 1_000 });
    chains.remember(parse({ model: 'm', input: 'x', store: false }), 'resp_x', out('a'), 1);
    expect(chains.sizes().responses).toBe(0);
    for (let i = 0; i < 10; i++)
      chains.remember(parse({ model: 'm', input: `q${i}` }), `resp_${i}`, out('a'), 1);
    expect(chains.sizes().responses).toBe(3);
    // What the cap pushed out no longer counts: the blocks of the three held, each as one alone holds.
    const one = new ResponseChains();
    one.remember(parse({ model: 'm', input: 'q0' }), 'resp_0', out('a'), 1);
    expect(chains.sizes().blocks).toBe(3 * one.sizes().blocks);
    const big = new ResponseChains({ maxBlocks: 50 });
    let prev = parse({ model: 'm', input: 'start' });
    big.remember(prev, 'resp_0', out('a'), 1);
    for (let i = 1; i < 40; i++) {
      prev = parse({ model: 'm', previous_response_id: `resp_${i - 1}`, input: `q${i}` });
      big.remember(prev, `resp_${i}`, out('a'), 1);
    }
    // The newest chain alone is past the block bound (40 turns, 2 blocks each): it stays, the rest go.
    expect(big.sizes()).toEqual({ responses: 1, blocks: 80 });
    expect(big.whole(parse({ model: 'm', previous_response_id: 'resp_39', input: 'z' })).chain?.context).toBe(
      'known',
    );
  });
});
