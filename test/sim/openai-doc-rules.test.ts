// Issue 11, "OpenAI": each documented rule through the official SDK against the simulator, with the
// sentence of shared/reference/openai/ it comes from quoted above its test.

import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { parsePrefix } from '../../src/prefix/build-prefix.js';
import { filler, MODES, startSim } from './helpers.js';

type Json = Record<string, unknown>;
const h = await startSim();
const zdr = await startSim({ zdr: true } as never);
const thinking = filler(700, 4);
const s = await startSim({
  script: { conversations: [{ turns: [{ thinking, text: 'The answer is 4.' }] }] },
});

const respPrefix = (body: Json) => parsePrefix(JSON.stringify(body), { format: 'openai-responses' });

async function responses(client: OpenAI, body: Json, stream: boolean): Promise<Json> {
  if (!stream) return (await client.responses.create(body as never)) as unknown as Json;
  return (await client.responses.stream(body as never).finalResponse()) as unknown as Json;
}

async function chat(client: OpenAI, body: Json): Promise<Json> {
  return (await client.chat.completions.create(body as never)).usage as unknown as Json;
}

async function openaiError(call: () => Promise<unknown>): Promise<{ status: number; error: Json }> {
  try {
    await call();
  } catch (err) {
    if (err instanceof OpenAI.APIError) return { status: err.status as number, error: err.error as Json };
    throw err;
  }
  throw new Error('expected the request to be rejected');
}

const usageOf = (r: Json) => r.usage as Json;
const details = (r: Json) => usageOf(r).input_tokens_details as Json;

describe('Responses usage (responses-object-tail.excerpt.md, ResponseUsage)', () => {
  // "`input_tokens_details: object { cache_write_tokens, cached_tokens }`" … "`cache_write_tokens: number`"
  // (required on Responses); chat-completions-retrieve.md: "`cache_write_tokens: optional number`".
  it.each(MODES)(
    'always carries cache_write_tokens on Responses, also before GPT-5.6 (%s)',
    async (_m, stream) => {
      h.sim.reset();
      const body = { model: 'gpt-5.4', input: filler(1500) };
      const first = await responses(h.openai(), body, stream);
      expect(details(first)).toEqual({ cached_tokens: 0, cache_write_tokens: 0 });
      const second = await responses(h.openai(), body, stream);
      expect(details(second).cache_write_tokens).toBe(0);
      expect(details(second).cached_tokens).toBeGreaterThan(0);
      const c = await chat(h.openai(), {
        model: 'gpt-5.4',
        messages: [{ role: 'user', content: filler(1500) }],
      });
      expect(c.prompt_tokens_details).not.toHaveProperty('cache_write_tokens');
    },
  );
});

describe('retention defaults (prompt-caching.md, "Retention defaults and Zero Data Retention")', () => {
  // "For models that support both `in_memory` and `24h`, the default depends on your organization's data
  // retention policy: Organizations without Zero Data Retention enabled default to `24h`. Organizations
  // with Zero Data Retention enabled default to `in_memory`."
  const body = (model: string, extra: Json = {}) => ({
    model,
    messages: [{ role: 'user', content: filler(1500) }],
    ...extra,
  });
  const cachedAfter = async (s: typeof h, b: Json, idleMs: number) => {
    s.sim.reset();
    await chat(s.openai(), b);
    s.clock.advance(idleMs);
    return (((await chat(s.openai(), b)).prompt_tokens_details as Json).cached_tokens as number) > 0;
  };

  it('defaults to 24h without ZDR', async () => {
    expect(await cachedAfter(h, body('gpt-5.4'), 6 * 60_000)).toBe(true);
    expect(await cachedAfter(h, body('gpt-4.1'), 23 * 60 * 60_000)).toBe(true);
    expect(await cachedAfter(h, body('gpt-5.4', { prompt_cache_retention: 'in_memory' }), 6 * 60_000)).toBe(
      false,
    );
  });

  it('defaults to in_memory with `zdr` (cacheward sim --zdr)', async () => {
    expect(await cachedAfter(zdr, body('gpt-5.4'), 6 * 60_000)).toBe(false);
    expect(await cachedAfter(zdr, body('gpt-5.4', { prompt_cache_retention: '24h' }), 6 * 60_000)).toBe(true);
  });

  // Summary table: GPT-5.5 "Supported retention values: `"24h"` only"; responses-object-tail: "For
  // `gpt-5.5`, `gpt-5.5-pro`, and future models, only `24h` is supported."
  it('keeps gpt-5.5 at 24h, with or without ZDR, and refuses in_memory for it', async () => {
    // (GPT-5.5 reports cached tokens in steps of 2,048: the prompt is longer than one.)
    const long = { model: 'gpt-5.5', messages: [{ role: 'user', content: filler(3000) }] };
    expect(await cachedAfter(zdr, long, 60 * 60_000)).toBe(true);
    const r = await openaiError(() =>
      h.openai().chat.completions.create(body('gpt-5.5', { prompt_cache_retention: 'in_memory' }) as never),
    );
    expect(r.status).toBe(400);
    expect(r.error).toMatchObject({ type: 'invalid_request_error', param: 'prompt_cache_retention' });
    expect(String(r.error.message)).toMatch(/'in_memory'.*gpt-5\.5.*'24h'/);
  });

  // "\* Extended retention is supported by `gpt-5.5`, `gpt-5.5-pro`, `gpt-5.4`, `gpt-5.2`, … and `gpt-4.1`."
  it('keeps models without extended retention in memory, and refuses 24h for them', async () => {
    expect(await cachedAfter(h, body('gpt-4o'), 6 * 60_000)).toBe(false);
    const r = await openaiError(() =>
      h.openai().chat.completions.create(body('gpt-4o', { prompt_cache_retention: '24h' }) as never),
    );
    expect(r.error).toMatchObject({ param: 'prompt_cache_retention' });
    const bad = await openaiError(() =>
      h.openai().chat.completions.create(body('gpt-5.4', { prompt_cache_retention: 'forever' }) as never),
    );
    expect(bad.error.message).toBe("Invalid value: 'forever'. Supported values are: 'in_memory' and '24h'.");
  });
});

describe('prompt cache diagnostics only on GPT-5.6 and later (prompt-caching-diagnostics.md)', () => {
  // "Diagnostics are available in the Responses API for GPT-5.6 and later supported models." "`unavailable`:
  // The comparison could not produce a conclusive result, or the model does not support diagnostics."
  it.each(MODES)('answers unavailable for gpt-5.4 (%s)', async (_m, stream) => {
    const base = { model: 'gpt-5.4', input: filler(1500) };
    const first = await responses(h.openai(), base, stream);
    const second = await responses(
      h.openai(),
      { ...base, prompt_cache_options: { comparison_response_id: first.id } },
      stream,
    );
    expect(second.prompt_cache_diagnostics).toEqual({ type: 'unavailable' });
  });
});

describe('previous_response_id chains (the chained context is input, cacheable like a resent conversation)', () => {
  const instructions = filler(400, 1);
  /** Output items as the API sent them: the SDK's stream helper adds `parsed: null` to output_text parts. */
  const asSent = (output: unknown): Json[] =>
    (output as Json[]).map((item) =>
      Array.isArray(item.content)
        ? { ...item, content: (item.content as Json[]).map(({ parsed: _p, ...part }) => part) }
        : item,
    );
  const user = (n: number, tokens = 900) => ({ role: 'user', content: filler(tokens, 10 + n) });

  it.each(MODES)('reads the previous context and bills the whole chain as input (%s)', async (_m, stream) => {
    h.sim.reset();
    const b1 = { model: 'gpt-5.6', instructions, input: [user(1)] };
    const r1 = await responses(h.openai(), b1, stream);
    expect(details(r1)).toEqual({ cached_tokens: 0, cache_write_tokens: respPrefix(b1).totalTokens });
    const r2 = await responses(
      h.openai(),
      { model: 'gpt-5.6', instructions, previous_response_id: r1.id, input: [user(2, 300)] },
      stream,
    );
    // The same conversation resent in full: its prefix is what the chained request was billed for.
    const resent = { model: 'gpt-5.6', instructions, input: [user(1), ...asSent(r1.output), user(2, 300)] };
    const p = respPrefix(resent);
    expect(usageOf(r2).input_tokens).toBe(p.totalTokens);
    expect(details(r2).cached_tokens).toBe(respPrefix(b1).totalTokens);
    expect(details(r2).cache_write_tokens).toBe(p.totalTokens - respPrefix(b1).totalTokens);
    // …and resending it reads everything the chained request wrote.
    const r3 = await responses(h.openai(), resent, stream);
    expect(details(r3)).toEqual({ cached_tokens: p.totalTokens, cache_write_tokens: 0 });
    // A chain of chains holds every turn.
    const r4 = await responses(
      h.openai(),
      { model: 'gpt-5.6', instructions, previous_response_id: r2.id, input: [user(3, 200)] },
      stream,
    );
    const resent4 = { ...resent, input: [...resent.input, ...asSent(r2.output), user(3, 200)] };
    expect(usageOf(r4).input_tokens).toBe(respPrefix(resent4).totalTokens);
    expect(details(r4).cached_tokens).toBe(p.totalTokens);
  });

  // error-codes.md: "`previous_response_not_found`: The `previous_response_id` cannot be resolved from
  // available state. Retry with full input context and `previous_response_id` set to `null`."
  it('refuses an unknown id, a response stored with `store: false`, and one from another project', async () => {
    const notFound = (id: string) => ({
      message: `Previous response with id '${id}' not found.`,
      type: 'invalid_request_error',
      param: 'previous_response_id',
      code: 'previous_response_not_found',
    });
    const unknown = await openaiError(() =>
      h.openai().responses.create({ model: 'gpt-5.6', previous_response_id: 'resp_nope', input: 'hi' }),
    );
    expect(unknown).toEqual({ status: 400, error: notFound('resp_nope') });
    const unstored = await h.openai().responses.create({ model: 'gpt-5.6', input: 'hi', store: false });
    expect((unstored as unknown as Json).store).toBe(false);
    const chained = await openaiError(() =>
      h.openai().responses.create({ model: 'gpt-5.6', previous_response_id: unstored.id, input: 'again' }),
    );
    expect(chained.error).toEqual(notFound(unstored.id));
    const stored = await h.openai('sk-project-a').responses.create({ model: 'gpt-5.6', input: 'hi' });
    const other = await openaiError(() =>
      h
        .openai('sk-project-b')
        .responses.create({ model: 'gpt-5.6', previous_response_id: stored.id, input: 'x' }),
    );
    expect(other.error).toEqual(notFound(stored.id));
    await expect(
      h
        .openai('sk-project-a')
        .responses.create({ model: 'gpt-5.6', previous_response_id: stored.id, input: 'x' }),
    ).resolves.toMatchObject({ previous_response_id: stored.id });
  });
});

describe('encrypted reasoning (include: ["reasoning.encrypted_content"])', () => {
  const question = { role: 'user', content: `What is 2 + 2? ${filler(1200, 2)}` };

  it.each(MODES)('puts encrypted_content on reasoning items only when asked (%s)', async (_m, stream) => {
    const plain = await responses(s.openai(), { model: 'gpt-5.6', input: [question] }, stream);
    const r0 = (plain.output as Json[]).find((o) => o.type === 'reasoning') as Json;
    expect(r0).toBeDefined();
    expect(r0).not.toHaveProperty('encrypted_content');
    const asked = await responses(
      s.openai(),
      { model: 'gpt-5.6', input: [question], store: false, include: ['reasoning.encrypted_content'] },
      stream,
    );
    const r1 = (asked.output as Json[]).find((o) => o.type === 'reasoning') as Json;
    expect(typeof r1.encrypted_content).toBe('string');
    expect((r1.encrypted_content as string).length).toBeGreaterThan(0);
    expect((usageOf(asked).output_tokens_details as Json).reasoning_tokens).toBeGreaterThan(0);
  });

  // Sent back as input, an encrypted reasoning item counts as the reasoning it stands for.
  it('counts a reasoning item sent back as the reasoning tokens it stands for', async () => {
    const first = await s.openai().responses.create({
      model: 'gpt-5.6',
      input: [question] as never,
      store: false,
      include: ['reasoning.encrypted_content'],
    });
    const reasoningTokens = first.usage?.output_tokens_details.reasoning_tokens as number;
    expect(reasoningTokens).toBeGreaterThan(0);
    const [reasoning, ...rest] = first.output as unknown as Json[];
    expect(reasoning?.type).toBe('reasoning');
    const next = { role: 'user', content: 'And 3 + 3?' };
    const withItem = await s.openai().responses.create({
      model: 'gpt-5.6',
      input: [question, reasoning, ...rest, next] as never,
      store: false,
    });
    const without = await s.openai().responses.create({
      model: 'gpt-5.6',
      input: [question, ...rest, next] as never,
      store: false,
    });
    expect((withItem.usage?.input_tokens as number) - (without.usage?.input_tokens as number)).toBe(
      reasoningTokens,
    );
  });
});
