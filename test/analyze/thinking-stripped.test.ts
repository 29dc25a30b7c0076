// The thinking_stripped cause, through `@anthropic-ai/sdk` against `cacheward sim` behind `cacheward proxy`:
// on an older model, new user text strips the earlier thinking from context and the report names that miss;
// on Opus 4.5+ the thinking stays, the cache reads, and there is no miss.
//
// prompt-caching.md, "Caching with thinking blocks": "On earlier Opus/Sonnet models and all Haiku models,
// cache gets invalidated when non-tool-result user content is added, causing all previous thinking blocks
// to be stripped from context." "On Opus 4.5+ and Sonnet 4.6+, thinking blocks are preserved by default
// even when non-tool-result user content is added, so the cache remains valid."

import { describe, expect, it } from 'vitest';
import { PriceTable } from '../../src/analyze/price-table.js';
import { analyzePaths } from '../../src/report/analyze-paths.js';
import { startProxy } from '../proxy/helpers.js';
import { EPHEMERAL, filler } from '../sim/helpers.js';

type Json = Record<string, unknown>;

/** A tool loop with thinking, then the user's next question (plain text, not a tool result). */
function conversation(model: string): [Json, Json] {
  const loop: Json = {
    model,
    max_tokens: 64,
    tools: [
      { name: 'weather', description: 'weather tool', input_schema: { type: 'object', properties: {} } },
    ],
    thinking: { type: 'enabled', budget_tokens: 2048 },
    messages: [
      { role: 'user', content: `What's the weather in Paris? ${filler(4200, 1)}` },
      {
        role: 'assistant',
        content: [
          { type: 'thinking', thinking: filler(300, 91), signature: 'sig1' },
          { type: 'tool_use', id: 'toolu_1', name: 'weather', input: { city: 'Paris' } },
        ],
      },
      {
        role: 'user',
        content: [
          { type: 'tool_result', tool_use_id: 'toolu_1', content: '15 degrees', cache_control: EPHEMERAL },
        ],
      },
    ],
  };
  const next = structuredClone(loop);
  (next.messages as Json[]).push(
    { role: 'assistant', content: [{ type: 'text', text: 'It is 15 degrees.' }] },
    { role: 'user', content: [{ type: 'text', text: 'And tomorrow?', cache_control: EPHEMERAL }] },
  );
  return [loop, next];
}

async function session(model: string) {
  const h = await startProxy({ capture: 'hashes' });
  const client = h.anthropic();
  const usages: Json[] = [];
  for (const body of conversation(model)) {
    const r = await client.messages.create(body as never);
    usages.push(r.usage as unknown as Json);
  }
  await h.records();
  const result = await analyzePaths([h.dir], { prices: new PriceTable() });
  return { usages, result };
}

describe('thinking_stripped: the miss an older model makes when it strips earlier thinking', () => {
  it.each(['claude-opus-4-1', 'claude-haiku-4-5'])('is named on %s', async (model) => {
    const { usages, result } = await session(model);
    expect(usages[1]?.cache_read_input_tokens).toBe(0);
    expect(result.requests.map((r) => r.relation)).toEqual(['new', 'continues']);
    const misses = result.misses.filter((m) => m.cause !== 'cold_start');
    expect(misses.map((m) => [m.turn, m.cause])).toEqual([[2, 'thinking_stripped']]);
    const miss = misses[0];
    // All the parent wrote is re-written: the entry held the thinking that left the prompt.
    expect(miss?.rewrittenTokens).toBe(usages[0]?.cache_creation_input_tokens);
    expect(miss?.detail.evidence).toMatchObject({ reason: 'thinking_stripped', blocks: 1 });
    expect(miss?.sentence).toContain(`thinking stripped from context: new user content made ${model} drop 1`);
    expect(result.byCause.find((c) => c.cause === 'thinking_stripped')?.misses).toBe(1);
  });

  it('is not named on claude-opus-4-5, which keeps the thinking and reads the cache', async () => {
    const { usages, result } = await session('claude-opus-4-5');
    expect(usages[1]?.cache_read_input_tokens).toBe(usages[0]?.cache_creation_input_tokens);
    expect(result.misses.map((m) => m.cause)).toEqual(['cold_start']);
  });
});
