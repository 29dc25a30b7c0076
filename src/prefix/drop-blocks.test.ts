// dropBlocks gives the keys and token sums of a body that never held the dropped blocks.
// Pure.

import { describe, expect, it } from 'vitest';
import { PrefixBuilder } from './build-prefix.js';
import { dropBlocks } from './drop-blocks.js';

type Json = Record<string, unknown>;
const thinking = (n: number) => ({
  type: 'thinking',
  thinking: `thought ${n} `.repeat(40),
  signature: `s${n}`,
});

/** A conversation; `withThinking` false leaves every thinking block out (a message of only thinking goes). */
function conversation(withThinking: boolean): Json {
  const t = (n: number) => (withThinking ? [thinking(n)] : []);
  return {
    model: 'claude-sonnet-4-5',
    max_tokens: 10,
    tools: [{ name: 'a', description: 'a', input_schema: { type: 'object' } }],
    system: [{ type: 'text', text: 'be brief' }],
    messages: [
      { role: 'user', content: 'first question' },
      { role: 'assistant', content: [...t(1), { type: 'tool_use', id: 'toolu_1', name: 'a', input: {} }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'ok' }] },
      { role: 'assistant', content: [...t(2), { type: 'text', text: 'answer' }] },
      ...(withThinking ? [{ role: 'assistant', content: [thinking(3)] }] : []),
      { role: 'user', content: [{ type: 'text', text: 'next', cache_control: { type: 'ephemeral' } }] },
    ],
  };
}

describe('dropBlocks', () => {
  it('gives the keys and token sums of a body that never held the dropped blocks', () => {
    const b = new PrefixBuilder();
    const full = b.parse(JSON.stringify(conversation(true)), { format: 'anthropic-messages' });
    const without = b.parse(JSON.stringify(conversation(false)), { format: 'anthropic-messages' });
    const dropped = dropBlocks(full, (x) => x.kind === 'thinking');
    expect(dropped.blocks.map((x) => x.hash)).toEqual(without.blocks.map((x) => x.hash));
    expect(dropped.blocks.map((x) => x.cumulativeTokens)).toEqual(
      without.blocks.map((x) => x.cumulativeTokens),
    );
    expect(dropped.blocks.map((x) => x.index)).toEqual(without.blocks.map((_, i) => i));
    expect(dropped.totalTokens).toBe(without.totalTokens);
    expect(dropped.levels).toEqual(without.levels);
    // Blocks before the first dropped one are the same objects; the marker survives on the last block.
    expect(dropped.blocks[2]).toBe(full.blocks[2]);
    expect(dropped.blocks.at(-1)?.cacheControl).toEqual({ type: 'ephemeral' });
  });

  it('re-folds later levels when an earlier level lost a block', () => {
    const b = new PrefixBuilder();
    const body = (system: Json[]) => JSON.stringify({ ...conversation(false), system });
    const two = b.parse(
      body([
        { type: 'text', text: 'x' },
        { type: 'text', text: 'be brief' },
      ]),
      {
        format: 'anthropic-messages',
      },
    );
    const one = b.parse(body([{ type: 'text', text: 'be brief' }]), { format: 'anthropic-messages' });
    const dropped = dropBlocks(two, (x) => x.level === 'system' && x.partIndex === 0);
    expect(dropped.blocks.map((x) => x.hash)).toEqual(one.blocks.map((x) => x.hash));
    expect(dropped.levels.messages.foldHash).toBe(one.levels.messages.foldHash);
  });

  it('returns the prefix itself when nothing matches', () => {
    const p = new PrefixBuilder().parse(JSON.stringify(conversation(false)), {
      format: 'anthropic-messages',
    });
    expect(dropBlocks(p, () => false)).toBe(p);
  });
});
