import type OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { parsePrefix } from '../../src/prefix/build-prefix.js';
import { filler, MODES, startSim } from './helpers.js';

type Json = Record<string, unknown>;
const h = await startSim();

const chatTokensAt = (body: Json, index: number) =>
  parsePrefix(JSON.stringify(body), { format: 'openai-chat' }).blocks[index]?.cumulativeTokens as number;
const respPrefix = (body: Json) => parsePrefix(JSON.stringify(body), { format: 'openai-responses' });

async function chat(client: OpenAI, body: Json, stream: boolean) {
  if (!stream) return (await client.chat.completions.create(body as never)).usage as unknown as Json;
  const s = await client.chat.completions.create({
    ...body,
    stream: true,
    stream_options: { include_usage: true },
  } as never);
  let usage: Json | undefined;
  for await (const chunk of s as unknown as AsyncIterable<Json>) if (chunk.usage) usage = chunk.usage as Json;
  return usage as Json;
}

async function responses(client: OpenAI, body: Json, stream: boolean) {
  if (!stream) return (await client.responses.create(body as never)) as unknown as Json;
  return (await client.responses.stream(body as never).finalResponse()) as unknown as Json;
}

describe.each(MODES)('OpenAI Chat Completions, automatic caching (%s)', (_m, stream) => {
  const body = (n: number, model = 'gpt-5.4', extra: Json = {}) => ({
    model,
    messages: [
      { role: 'developer', content: filler(900) },
      ...Array.from({ length: n }, (_, i) => ({
        role: i % 2 ? 'assistant' : 'user',
        content: filler(200, i),
      })),
    ],
    ...extra,
  });

  it('caches nothing below 1,024 tokens and rounds reads down to a multiple of 128', async () => {
    h.sim.reset();
    const small = { model: 'gpt-5.4', messages: [{ role: 'user', content: filler(900) }] };
    await chat(h.openai(), small, stream);
    expect(((await chat(h.openai(), small, stream)).prompt_tokens_details as Json).cached_tokens).toBe(0);
    const b = body(3);
    await chat(h.openai(), b, stream);
    const u = await chat(h.openai(), b, stream);
    const total = chatTokensAt(b, 3);
    expect(u.prompt_tokens).toBe(total);
    expect((u.prompt_tokens_details as Json).cached_tokens).toBe(Math.floor(total / 128) * 128);
    expect(u.prompt_tokens_details).not.toHaveProperty('cache_write_tokens');
  });

  it('reads the shared prefix of a conversation that grew, and counts cached tokens inside prompt_tokens', async () => {
    h.sim.reset();
    await chat(h.openai(), body(3), stream);
    const grown = body(5);
    const u = await chat(h.openai(), grown, stream);
    expect((u.prompt_tokens_details as Json).cached_tokens).toBe(
      Math.floor(chatTokensAt(grown, 3) / 128) * 128,
    );
    expect(u.prompt_tokens).toBe(chatTokensAt(grown, 5));
  });

  it('uses 2,048-token granularity on GPT-5.5', async () => {
    h.sim.reset();
    const b = body(8, 'gpt-5.5');
    await chat(h.openai(), b, stream);
    const cached = ((await chat(h.openai(), b, stream)).prompt_tokens_details as Json)
      .cached_tokens as number;
    expect(cached % 2048).toBe(0);
    expect(cached).toBe(Math.floor(chatTokensAt(b, 8) / 2048) * 2048);
  });

  it('separates prompt_cache_key values and API keys', async () => {
    h.sim.reset();
    await chat(h.openai(), body(3, 'gpt-5.4', { prompt_cache_key: 'a' }), stream);
    const other = await chat(h.openai(), body(3, 'gpt-5.4', { prompt_cache_key: 'b' }), stream);
    expect((other.prompt_tokens_details as Json).cached_tokens).toBe(0);
    const otherKey = await chat(
      h.openai('another-key'),
      body(3, 'gpt-5.4', { prompt_cache_key: 'a' }),
      stream,
    );
    expect((otherKey.prompt_tokens_details as Json).cached_tokens).toBe(0);
  });

  it('keeps in_memory entries 5 minutes and 24h entries a day', async () => {
    h.sim.reset();
    // Without ZDR the default is 24h (openai-doc-rules.test.ts): ask for in_memory explicitly.
    const mem = body(3, 'gpt-5.4', { prompt_cache_retention: 'in_memory' });
    await chat(h.openai(), mem, stream);
    h.clock.advance(5 * 60_000 + 1);
    expect(((await chat(h.openai(), mem, stream)).prompt_tokens_details as Json).cached_tokens).toBe(0);
    h.sim.reset();
    const day = body(3, 'gpt-5.4', { prompt_cache_retention: '24h' });
    await chat(h.openai(), day, stream);
    h.clock.advance(23 * 60 * 60_000);
    expect(
      ((await chat(h.openai(), day, stream)).prompt_tokens_details as Json).cached_tokens,
    ).toBeGreaterThan(0);
  });
});

describe.each(MODES)('OpenAI Responses, GPT-5.6 breakpoints (%s)', (_m, stream) => {
  const input = (n: number) =>
    Array.from({ length: n }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: filler(300, i) }));

  it('writes at the implicit breakpoint (1.25x) and reads it back exactly, 30 minutes from the last use', async () => {
    h.sim.reset();
    const body = { model: 'gpt-5.6', instructions: filler(400), input: input(5) };
    const total = respPrefix(body).totalTokens;
    const first = (await responses(h.openai(), body, stream)).usage as Json;
    expect(first.input_tokens_details).toEqual({ cached_tokens: 0, cache_write_tokens: total });
    const second = (await responses(h.openai(), body, stream)).usage as Json;
    expect(second.input_tokens_details).toEqual({ cached_tokens: total, cache_write_tokens: 0 });
    expect(second.input_tokens).toBe(total);
    h.clock.advance(29 * 60_000);
    expect(((await responses(h.openai(), body, stream)).usage as Json).input_tokens_details).toMatchObject({
      cached_tokens: total,
    });
    h.clock.advance(30 * 60_000 + 1);
    expect(((await responses(h.openai(), body, stream)).usage as Json).input_tokens_details).toMatchObject({
      cached_tokens: 0,
    });
  });

  it('reads an earlier eligible message ending when the conversation grows', async () => {
    h.sim.reset();
    const b1 = { model: 'gpt-5.6', input: input(5) };
    await responses(h.openai(), b1, stream);
    const b2 = { model: 'gpt-5.6', input: input(7) };
    const p2 = respPrefix(b2);
    const u = (await responses(h.openai(), b2, stream)).usage as Json;
    const at4 = p2.blocks[4]?.cumulativeTokens;
    expect(u.input_tokens_details).toEqual({
      cached_tokens: at4,
      cache_write_tokens: p2.totalTokens - (at4 ?? 0),
    });
  });

  it('caches nothing in explicit mode without breakpoints, and writes at explicit breakpoints', async () => {
    h.sim.reset();
    const none = { model: 'gpt-5.6', input: input(5), prompt_cache_options: { mode: 'explicit' } };
    expect(((await responses(h.openai(), none, stream)).usage as Json).input_tokens_details).toEqual({
      cached_tokens: 0,
      cache_write_tokens: 0,
    });
    const items = input(5) as Json[];
    items[2] = {
      role: 'user',
      content: [{ type: 'input_text', text: filler(600, 2), prompt_cache_breakpoint: { mode: 'explicit' } }],
    };
    const marked = { model: 'gpt-5.6', input: items, prompt_cache_options: { mode: 'explicit' } };
    const at2 = respPrefix(marked).blocks[2]?.cumulativeTokens;
    expect(((await responses(h.openai(), marked, stream)).usage as Json).input_tokens_details).toEqual({
      cached_tokens: 0,
      cache_write_tokens: at2,
    });
    expect(((await responses(h.openai(), marked, stream)).usage as Json).input_tokens_details).toEqual({
      cached_tokens: at2,
      cache_write_tokens: 0,
    });
  });

  it('reports prompt_cache_diagnostics against a comparison response', async () => {
    h.sim.reset();
    const base = {
      model: 'gpt-5.6',
      tools: [{ type: 'function', name: 'get_time', parameters: { type: 'object', properties: {} } }],
      input: input(3),
    };
    const first = await responses(h.openai(), base, stream);
    const same = await responses(
      h.openai(),
      { ...base, prompt_cache_options: { comparison_response_id: first.id } },
      stream,
    );
    expect(same.prompt_cache_diagnostics).toEqual({ type: 'cache_hit' });
    const renamed = {
      ...base,
      tools: [{ type: 'function', name: 'get_date', parameters: { type: 'object', properties: {} } }],
    };
    const miss = await responses(
      h.openai(),
      { ...renamed, prompt_cache_options: { comparison_response_id: first.id } },
      stream,
    );
    expect(miss.prompt_cache_diagnostics).toMatchObject({ type: 'cache_miss', reason: 'tools_changed' });
    const key = await responses(
      h.openai(),
      { ...base, prompt_cache_key: 'k2', prompt_cache_options: { comparison_response_id: first.id } },
      stream,
    );
    expect(key.prompt_cache_diagnostics).toMatchObject({
      type: 'cache_miss',
      reason: 'prompt_cache_key_changed',
    });
    const lost = await responses(
      h.openai(),
      { ...base, prompt_cache_options: { comparison_response_id: 'resp_unknown' } },
      stream,
    );
    expect(lost.prompt_cache_diagnostics).toEqual({ type: 'comparison_response_not_found' });
  });
});

describe('scripted OpenAI tool loops', () => {
  it('plays function calls through Chat and Responses', async () => {
    const s = await startSim({
      script: {
        conversations: [
          {
            match: 'weather',
            turns: [
              { tool_calls: [{ name: 'get_weather', input: { city: 'Paris' } }] },
              { text: '15 degrees.' },
            ],
          },
        ],
      },
    });
    const c = await s.openai().chat.completions.create({
      model: 'gpt-5.4',
      messages: [{ role: 'user', content: 'weather in Paris?' }],
    });
    const call = c.choices[0]?.message.tool_calls?.[0] as {
      id: string;
      function: { name: string; arguments: string };
    };
    expect(c.choices[0]?.finish_reason).toBe('tool_calls');
    expect(call.function).toEqual({ name: 'get_weather', arguments: '{"city":"Paris"}' });
    const c2 = await s.openai().chat.completions.create({
      model: 'gpt-5.4',
      messages: [
        { role: 'user', content: 'weather in Paris?' },
        { role: 'assistant', content: null, tool_calls: [call as never] },
        { role: 'tool', tool_call_id: call.id, content: '15' },
      ],
    });
    expect(c2.choices[0]?.message.content).toBe('15 degrees.');
    const r = await s
      .openai()
      .responses.stream({ model: 'gpt-5.6', input: 'weather in Paris?' })
      .finalResponse();
    const fc = r.output.find((o) => o.type === 'function_call') as { name: string; arguments: string };
    expect(fc).toMatchObject({ name: 'get_weather', arguments: '{"city":"Paris"}' });
  });
});

describe('OpenAI overflow routing (optional model)', () => {
  it('sends requests past the per-minute limit for one prefix to a cold machine', async () => {
    const s = await startSim({ openaiOverflowPerMinute: 3 });
    const b = { model: 'gpt-5.4', messages: [{ role: 'user', content: filler(1500) }] };
    const cached: number[] = [];
    for (let i = 0; i < 5; i++) {
      const u = (await s.openai().chat.completions.create(b as never)).usage as unknown as Json;
      cached.push((u.prompt_tokens_details as Json).cached_tokens as number);
    }
    expect(cached.slice(0, 3).map((c) => c > 0)).toEqual([false, true, true]);
    expect(cached.slice(3)).toEqual([0, 0]);
    s.clock.advance(61_000);
    const later = (await s.openai().chat.completions.create(b as never)).usage as unknown as Json;
    expect((later.prompt_tokens_details as Json).cached_tokens).toBeGreaterThan(0);
  });
});
