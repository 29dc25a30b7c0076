// Issue 11, "Anthropic": each documented rule through the official SDK against the simulator, with the
// sentence of shared/reference/anthropic/ it comes from quoted above its test.

import Anthropic from '@anthropic-ai/sdk';
import { describe, expect, it } from 'vitest';
import { CACHE_DIAGNOSIS_BETA } from '../../src/cache/anthropic-diagnostics.js';
import { parsePrefix } from '../../src/prefix/build-prefix.js';
import { EPHEMERAL, filler, MODES, send, startSim } from './helpers.js';

type Json = Record<string, unknown>;
const h = await startSim();

async function rejected(
  body: Json,
  headers?: Record<string, string>,
  apiKey?: string,
): Promise<{ status: number; type: string; message: string }> {
  try {
    await h.anthropic(apiKey).messages.create(body as never, headers ? { headers } : undefined);
  } catch (err) {
    if (err instanceof Anthropic.APIError) {
      const e = (err.error as { error: { type: string; message: string } }).error;
      return { status: err.status as number, type: e.type, message: e.message };
    }
    throw err;
  }
  throw new Error('expected the request to be rejected');
}

const tool = (name: string, extra: Json = {}) => ({
  name,
  description: `${name} tool`,
  input_schema: { type: 'object' },
  ...extra,
});

const prefixOf = (body: Json, headers?: Record<string, string>) =>
  parsePrefix(JSON.stringify(body), { format: 'anthropic-messages', ...(headers ? { headers } : {}) });

describe('thinking blocks on older models (prompt-caching.md, "Caching with thinking blocks")', () => {
  // "On earlier Opus/Sonnet models and all Haiku models, cache gets invalidated when non-tool-result user
  // content is added, causing all previous thinking blocks to be stripped from context."
  // "On Opus 4.5+ and Sonnet 4.6+, thinking blocks are preserved by default even when non-tool-result
  // user content is added, so the cache remains valid."
  const thinking = (n: number) => ({ type: 'thinking', thinking: filler(300, 90 + n), signature: `sig${n}` });
  const conversation = (model: string) => {
    const request2: Json = {
      model,
      max_tokens: 64,
      tools: [tool('weather')],
      thinking: { type: 'enabled', budget_tokens: 2048 },
      messages: [
        { role: 'user', content: `What's the weather in Paris? ${filler(4200, 1)}` },
        {
          role: 'assistant',
          content: [
            thinking(1),
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
    const request3 = structuredClone(request2);
    (request3.messages as Json[]).push(
      { role: 'assistant', content: [thinking(2), { type: 'text', text: 'It is 15 degrees.' }] },
      { role: 'user', content: [{ type: 'text', text: 'And tomorrow?', cache_control: EPHEMERAL }] },
    );
    const request4 = structuredClone(request3);
    (request4.messages as Json[]).push(
      {
        role: 'assistant',
        content: [thinking(3), { type: 'tool_use', id: 'toolu_2', name: 'weather', input: { day: 1 } }],
      },
      {
        role: 'user',
        content: [
          { type: 'tool_result', tool_use_id: 'toolu_2', content: '17 degrees', cache_control: EPHEMERAL },
        ],
      },
    );
    return [request2, request3, request4] as const;
  };
  /** Tokens of the blocks of a prefix that are thinking blocks. */
  const thinkingTokens = (body: Json, upTo = Number.POSITIVE_INFINITY) =>
    prefixOf(body)
      .blocks.filter((b) => b.kind === 'thinking' && b.index <= upTo)
      .reduce((t, b) => t + b.tokens, 0);

  it.each(MODES)(
    'strips earlier thinking on Sonnet 4.5 once a user turn adds text (%s)',
    async (_m, stream) => {
      h.sim.reset();
      const [r2, r3, r4] = conversation('claude-sonnet-4-5');
      const u2 = await send(h.anthropic(), r2, stream);
      // A tool loop keeps the thinking: request 2 is written whole.
      expect(u2.cache_creation_input_tokens).toBe(prefixOf(r2).totalTokens);
      const u3 = await send(h.anthropic(), r3, stream);
      // The entry request 2 wrote held thinking_block_1: it cannot be read; both thinking blocks are gone.
      expect(u3.cache_read_input_tokens).toBe(0);
      const total3 =
        u3.input_tokens + (u3.cache_creation_input_tokens ?? 0) + (u3.cache_read_input_tokens ?? 0);
      expect(total3).toBe(prefixOf(r3).totalTokens - thinkingTokens(r3));
      // The next tool loop reads the stripped prefix request 3 wrote (its own new thinking is kept).
      const u4 = await send(h.anthropic(), r4, stream);
      expect(u4.cache_read_input_tokens).toBe(u3.cache_creation_input_tokens);
      const total4 =
        u4.input_tokens + (u4.cache_creation_input_tokens ?? 0) + (u4.cache_read_input_tokens ?? 0);
      const beforeLastText = prefixOf(r4).blocks.find((b) => b.messageIndex === 4)?.index ?? 0;
      expect(total4).toBe(prefixOf(r4).totalTokens - thinkingTokens(r4, beforeLastText));
    },
  );

  it.each(['claude-haiku-4-5', 'claude-opus-4-1', 'claude-sonnet-4'])(
    'strips them on %s too',
    async (model) => {
      h.sim.reset();
      const [r2, r3] = conversation(model);
      expect((await send(h.anthropic(), r2, false)).cache_creation_input_tokens).toBe(
        prefixOf(r2).totalTokens,
      );
      expect((await send(h.anthropic(), r3, false)).cache_read_input_tokens).toBe(0);
    },
  );

  it.each(['claude-sonnet-4-6', 'claude-opus-4-5', 'claude-opus-5'])('keeps them on %s', async (model) => {
    h.sim.reset();
    const [r2, r3] = conversation(model);
    await send(h.anthropic(), r2, false);
    const u3 = await send(h.anthropic(), r3, false);
    expect(u3.cache_read_input_tokens).toBe(prefixOf(r2).totalTokens);
  });
});

describe('max_tokens: 0 pre-warms the cache (prompt-caching.md, "Pre-warming the cache")', () => {
  // "Set `max_tokens: 0` in your request. The API reads your prompt into the model and writes the cache at
  // any `cache_control` breakpoint, then returns immediately without generating any output. The response
  // has an empty `content` array, `stop_reason: "max_tokens"`, and a fully populated `usage` block."
  // create.md: "Set to `0` to populate the prompt cache without generating a response."
  const system = [{ type: 'text', text: filler(1500), cache_control: EPHEMERAL }];
  const warm = {
    model: 'claude-opus-5',
    max_tokens: 0,
    system,
    messages: [{ role: 'user', content: 'warmup' }],
  };

  it('writes the system prefix, answers with nothing, and the next request reads it', async () => {
    h.sim.reset();
    const msg = await h.anthropic().messages.create(warm as never);
    expect(msg.content).toEqual([]);
    expect(msg.stop_reason).toBe('max_tokens');
    // "Zero output tokens are billed."
    expect(msg.usage.output_tokens).toBe(0);
    const written = prefixOf(warm).blocks[0]?.cumulativeTokens;
    expect(msg.usage.cache_creation_input_tokens).toBe(written);
    const real = { ...warm, max_tokens: 64, messages: [{ role: 'user', content: 'How do I write a BST?' }] };
    const u = await send(h.anthropic(), real, false);
    expect(u.cache_read_input_tokens).toBe(written);
  });

  // "A `max_tokens: 0` request is rejected with an `invalid_request_error` if any of the following are set,
  // since each implies output that a zero-token budget cannot produce: `stream: true`, Extended thinking
  // (`thinking.type: "enabled"`), Structured outputs (`output_config.format`), `tool_choice` of
  // `{"type": "tool", ...}` or `{"type": "any"}`"
  it.each([
    ['stream: true', { stream: true }, /stream/],
    ['extended thinking', { thinking: { type: 'enabled', budget_tokens: 1024 } }, /thinking/],
    [
      'structured output',
      { output_config: { format: { type: 'json_schema', schema: {} } } },
      /output_config\.format/,
    ],
    ['tool_choice any', { tools: [tool('a')], tool_choice: { type: 'any' } }, /tool_choice/],
    ['tool_choice tool', { tools: [tool('a')], tool_choice: { type: 'tool', name: 'a' } }, /tool_choice/],
  ])('rejects max_tokens: 0 with %s', async (_name, extra, message) => {
    const r = await rejected({ ...warm, ...extra });
    expect(r.status).toBe(400);
    expect(r.type).toBe('invalid_request_error');
    expect(r.message).toMatch(/max_tokens: 0/);
    expect(r.message).toMatch(message);
  });

  it('still refuses a negative max_tokens', async () => {
    expect((await rejected({ ...warm, max_tokens: -1 })).message).toMatch(/^max_tokens/);
  });
});

describe('tool search errors (tool-search-tool.md, "Error handling")', () => {
  const search = { type: 'tool_search_tool_regex_20251119', name: 'tool_search_tool_regex' };
  const base = (tools: Json[], messages: Json[]) => ({
    model: 'claude-opus-5',
    max_tokens: 32,
    tools,
    messages,
  });

  it('rejects a request whose tools are all deferred', async () => {
    // "At least one tool must have defer_loading=false. All tools cannot be deferred."
    const r = await rejected(
      base(
        [{ ...search, defer_loading: true }, tool('get_weather', { defer_loading: true })],
        [{ role: 'user', content: 'weather?' }],
      ),
    );
    expect(r).toEqual({
      status: 400,
      type: 'invalid_request_error',
      message: 'At least one tool must have defer_loading=false. All tools cannot be deferred.',
    });
  });

  it('rejects a tool_reference to a tool that is not declared', async () => {
    // "Missing tool definition": "Tool reference 'unknown_tool' not found in available tools".
    // "Every tool referenced must have a corresponding tool definition in the top-level `tools` parameter"
    const custom = base(
      [tool('my_search'), tool('get_weather', { defer_loading: true })],
      [
        { role: 'user', content: 'weather?' },
        { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'my_search', input: {} }] },
        {
          role: 'user',
          content: [
            {
              type: 'tool_result',
              tool_use_id: 'toolu_1',
              content: [{ type: 'tool_reference', tool_name: 'unknown_tool' }],
            },
          ],
        },
      ],
    );
    expect(await rejected(custom)).toEqual({
      status: 400,
      type: 'invalid_request_error',
      message: "Tool reference 'unknown_tool' not found in available tools",
    });
    const declared = structuredClone(custom);
    (((declared.messages[2] as Json).content as Json[])[0] as Json).content = [
      { type: 'tool_reference', tool_name: 'get_weather' },
    ];
    await expect(h.anthropic().messages.create(declared as never)).resolves.toBeDefined();
    // The server-side format: a tool_search_tool_result passed back unchanged.
    const server = base(
      [search, tool('get_weather', { defer_loading: true })],
      [
        { role: 'user', content: 'weather?' },
        {
          role: 'assistant',
          content: [
            {
              type: 'server_tool_use',
              id: 'srvtoolu_1',
              name: 'tool_search_tool_regex',
              input: { pattern: 'w' },
            },
            {
              type: 'tool_search_tool_result',
              tool_use_id: 'srvtoolu_1',
              content: {
                type: 'tool_search_tool_search_result',
                tool_references: [{ type: 'tool_reference', tool_name: 'get_forecast' }],
              },
            },
          ],
        },
        { role: 'user', content: 'go on' },
      ],
    );
    expect((await rejected(server)).message).toBe(
      "Tool reference 'get_forecast' not found in available tools",
    );
  });

  it('rejects a tool_result that answers a server tool (srvtoolu_) id', async () => {
    // "Never return a `tool_result` for its `srvtoolu_...` ID." "Don't return a `tool_result` for the
    // `srvtoolu_...` ID: the API rejects the request."
    const body = base(
      [search, tool('get_weather', { defer_loading: true })],
      [
        { role: 'user', content: 'weather?' },
        {
          role: 'assistant',
          content: [
            {
              type: 'server_tool_use',
              id: 'srvtoolu_1',
              name: 'tool_search_tool_regex',
              input: { pattern: 'w' },
            },
          ],
        },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'srvtoolu_1', content: 'found it' }] },
      ],
    );
    const r = await rejected(body);
    expect(r.status).toBe(400);
    expect(r.message).toMatch(/srvtoolu_1/);
    expect(r.message).toMatch(/server tool/);
  });
});

describe('mid-conversation system messages (mid-conversation-system-messages.md, "Limitations")', () => {
  // "A `system` message must immediately follow a `user` turn (including a `user` turn that carries
  // `tool_result` blocks) or an `assistant` turn ending in a server tool result, and must precede an
  // `assistant` turn or end the array."
  const note = (text: string) => ({ role: 'system', content: text });
  const body = (messages: Json[]) => ({
    model: 'claude-opus-5',
    max_tokens: 32,
    tools: [{ type: 'web_search_20250305', name: 'web_search' }],
    messages,
  });
  const searched = {
    role: 'assistant',
    content: [
      { type: 'server_tool_use', id: 'srvtoolu_1', name: 'web_search', input: { query: 'cacheward' } },
      { type: 'web_search_tool_result', tool_use_id: 'srvtoolu_1', content: [] },
    ],
  };

  it('accepts one after an assistant turn that ends in a server tool result', async () => {
    const ok = body([{ role: 'user', content: 'search it' }, searched, note('Cite sources.')]);
    await expect(h.anthropic().messages.create(ok as never)).resolves.toBeDefined();
    const then = body([
      { role: 'user', content: 'search it' },
      searched,
      note('Cite sources.'),
      { role: 'assistant', content: 'Done.' },
      { role: 'user', content: 'thanks' },
    ]);
    await expect(h.anthropic().messages.create(then as never)).resolves.toBeDefined();
  });

  it('still rejects one after an assistant turn that ends in text', async () => {
    const r = await rejected(
      body([{ role: 'user', content: 'hi' }, { role: 'assistant', content: 'hello' }, note('x')]),
    );
    expect(r.message).toMatch(/must follow a user turn/);
  });

  // "Consecutive system messages are accepted and treated as a single system section, which follows the
  // same placement rule as a whole."
  it('treats consecutive system messages as one section', async () => {
    const two = body([{ role: 'user', content: 'hi' }, note('one'), note('two')]);
    await expect(h.anthropic().messages.create(two as never)).resolves.toBeDefined();
    const beforeAssistant = body([
      { role: 'user', content: 'hi' },
      note('one'),
      note('two'),
      { role: 'assistant', content: 'ok' },
      { role: 'user', content: 'go' },
    ]);
    await expect(h.anthropic().messages.create(beforeAssistant as never)).resolves.toBeDefined();
    const beforeUser = body([
      { role: 'user', content: 'hi' },
      note('one'),
      note('two'),
      { role: 'user', content: 'go' },
    ]);
    expect((await rejected(beforeUser)).message).toMatch(/followed by an assistant turn/);
    const afterText = body([
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: 'hello' },
      note('one'),
      note('two'),
    ]);
    expect((await rejected(afterText)).message).toMatch(/must follow a user turn/);
  });
});

describe('cache diagnostics scope (cache-diagnostics.md)', () => {
  const beta = { 'anthropic-beta': CACHE_DIAGNOSIS_BETA };
  const base: Json = {
    model: 'claude-opus-5',
    max_tokens: 32,
    system: 'You are terse.',
    tools: [tool('Read')],
    messages: [{ role: 'user', content: filler(600) }],
  };
  const ask = (body: Json, previous: string | null) => ({
    ...body,
    diagnostics: { previous_message_id: previous },
  });
  async function diag(body: Json, headers: Record<string, string> = beta, apiKey?: string): Promise<unknown> {
    const msg = await h.anthropic(apiKey).messages.create(body as never, { headers });
    return (msg as unknown as { diagnostics?: unknown }).diagnostics;
  }
  async function firstId(apiKey?: string, headers: Record<string, string> = beta): Promise<string> {
    return (await h.anthropic(apiKey).messages.create(ask(base, null) as never, { headers })).id;
  }

  // "Fingerprints ... are scoped to your organization and workspace". "`previous_message_not_found`: ...
  // Typically the previous request did not carry the beta header, it came from a different workspace, or
  // too much time has passed since it was sent."
  it('does not find a previous message from another workspace (API key)', async () => {
    const id = await firstId('cacheward-test-workspace-a');
    expect(await diag(ask(base, id), beta, 'cacheward-test-workspace-a')).toBeNull();
    expect(await diag(ask(base, id), beta, 'cacheward-test-workspace-b')).toEqual({
      cache_miss_reason: { type: 'previous_message_not_found' },
    });
  });

  it('does not find a previous message sent without the beta', async () => {
    const id = (await h.anthropic().messages.create(ask(base, null) as never)).id;
    expect(await diag(ask(base, id))).toEqual({ cache_miss_reason: { type: 'previous_message_not_found' } });
  });

  // "`unavailable`: ... the case where `model`, `system`, and `tools` match but another prompt-affecting
  // request parameter (`tool_choice`, `thinking`, `context_management`, `output_config`, `output_format`,
  // or the set of active `anthropic-beta` headers) differs"
  it.each([
    ['tool_choice', { tool_choice: { type: 'any' } }, beta],
    ['thinking', { thinking: { type: 'enabled', budget_tokens: 1024 } }, beta],
    ['context_management', { context_management: { edits: [{ type: 'clear_tool_uses_20250919' }] } }, beta],
    ['output_config.effort', { output_config: { effort: 'low' } }, beta],
    ['output_config.format', { output_config: { format: { type: 'json_schema', schema: {} } } }, beta],
    ['output_format', { output_format: { type: 'json_schema', schema: {} } }, beta],
    ['the beta set', {}, { 'anthropic-beta': `${CACHE_DIAGNOSIS_BETA},context-1m-2025-08-07` }],
  ])('reports unavailable when only %s differs', async (_name, extra, headers) => {
    const id = await firstId();
    expect(await diag(ask({ ...base, ...extra }, id), headers)).toEqual({
      cache_miss_reason: { type: 'unavailable' },
    });
  });

  // "field absent: The request did not include `diagnostics`, or the beta header was missing."
  it('has no diagnostics field without the beta, or without the request field', async () => {
    const id = await firstId();
    const noBeta = await h.anthropic().messages.create(ask(base, id) as never);
    expect('diagnostics' in noBeta).toBe(false);
    const noField = await h.anthropic().messages.create(base as never, { headers: beta });
    expect('diagnostics' in noField).toBe(false);
  });
});

describe("Claude Code's billing line (observed behaviour; docs/SPEC-caching.md)", () => {
  // Claude Code sends `x-anthropic-billing-header: cc_version=…; cc_entrypoint=…; cch=…;` as its first system
  // text block, different on every request, and still reads its whole prefix from cache on the first-party
  // API: that block is outside the cache key.
  const billing = (cch: string) => ({
    type: 'text',
    text: `x-anthropic-billing-header: cc_version=2.1.3.abc; cc_entrypoint=cli; cch=${cch};`,
  });
  const request = (cch: string, extra: Json[] = []) => ({
    model: 'claude-opus-5',
    max_tokens: 32,
    system: [
      billing(cch),
      { type: 'text', text: `You are Claude Code. ${filler(900)}`, cache_control: EPHEMERAL },
    ],
    messages: [
      { role: 'user', content: [{ type: 'text', text: filler(400, 3), cache_control: EPHEMERAL }] },
      ...extra,
    ],
  });

  it.each(MODES)('reads the whole prefix when only the billing line changed (%s)', async (_m, stream) => {
    h.sim.reset();
    const first = await send(h.anthropic(), request('1a2b3'), stream);
    expect(first.cache_creation_input_tokens).toBeGreaterThan(0);
    const second = await send(h.anthropic(), request('9f8e7'), stream);
    expect(second.cache_read_input_tokens).toBe(first.cache_creation_input_tokens);
    expect(second.cache_creation_input_tokens).toBe(0);
  });
});
