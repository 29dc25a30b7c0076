// cacheward/testing through the official SDKs: a conversation that reads its parent passes; one whose
// tools change fails with the first divergence named; an idle gap past the TTL fails as an expiry.

import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { agentConversation, anthropicTool, appendUserTurn } from '../sim/agent-conversation.js';
import { assertReadsParent, CacheAssertionError, createCacheTestbed } from './index.js';

type Params = Anthropic.MessageCreateParamsNonStreaming;

describe('cacheward/testing', () => {
  it('passes when each turn reads what the previous one cached (Anthropic, streaming and not)', async () => {
    const bed = createCacheTestbed();
    const client = bed.client(Anthropic);
    let body = agentConversation({ turns: 3, seed: 7 }) as unknown as Params;
    await client.messages.create(body);
    for (let i = 0; i < 2; i++) {
      body = appendUserTurn(body as never, `step ${i}`) as unknown as Params;
      bed.clock.advance(10_000);
      if (i === 0) await client.messages.create(body);
      else await client.messages.stream(body).finalMessage();
      expect(assertReadsParent(bed)).toBeGreaterThanOrEqual(0.95);
    }
    expect(bed.requests().map((r) => r.relation)).toEqual(['new', 'continues', 'continues']);
  });

  it('fails naming the first divergence and the cause when a tool is added', async () => {
    const bed = createCacheTestbed();
    const client = bed.client(Anthropic);
    const first = agentConversation({ turns: 3, seed: 8 });
    await client.messages.create(first as unknown as Params);
    const next = appendUserTurn(first, 'go on');
    next.tools = [...(next.tools as object[]), anthropicTool('mcp__late')];
    bed.clock.advance(5_000);
    await client.messages.create(next as unknown as Params);
    let err: unknown;
    try {
      assertReadsParent(bed);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(CacheAssertionError);
    expect((err as CacheAssertionError).code).toBe('CW_CACHE_ASSERTION');
    expect(String((err as Error).message)).toMatch(
      /read 0 of the [\d,]+ tokens its parent .* cached \(0\.0%/,
    );
    expect(String((err as Error).message)).toContain('first divergence: tools diverge');
    expect(String((err as Error).message)).toContain('`mcp__late` was appended');
    expect(String((err as Error).message)).toContain('cause: tools_changed');
    // One count of what was re-written (the cause's, in the provider's tokens), not a second estimate.
    expect(String((err as Error).message).match(/re-written/g)).toHaveLength(1);
  });

  it('names an expiry when the clock passes the TTL', async () => {
    const bed = createCacheTestbed();
    const client = bed.client(Anthropic);
    const first = agentConversation({ turns: 3, seed: 9 });
    await client.messages.create(first as unknown as Params);
    bed.clock.advance(6 * 60_000);
    await client.messages.create(appendUserTurn(first, 'back') as unknown as Params);
    expect(() => assertReadsParent(bed)).toThrow(/cause: ttl_expired: .*idle 360 s against a 300 s TTL/);
  });

  it('works with the OpenAI SDK (Responses, automatic caching)', async () => {
    const bed = createCacheTestbed();
    const client = bed.client(OpenAI);
    const input = Array.from({ length: 40 }, (_, i) => ({
      role: i % 2 ? ('assistant' as const) : ('user' as const),
      content: `message ${i}: ${'words of the conversation '.repeat(20)}`,
    }));
    await client.responses.create({ model: 'gpt-5.4', input });
    bed.clock.advance(5_000);
    await client.responses.create({
      model: 'gpt-5.4',
      input: [...input, { role: 'user', content: 'and now?' }],
    });
    expect(bed.last().relation).toBe('continues');
    expect(assertReadsParent(bed, { atLeast: 0.9 })).toBeGreaterThanOrEqual(0.9);
  });
});
