import Anthropic from '@anthropic-ai/sdk';
import { describe, expect, it } from 'vitest';
import { CACHE_DIAGNOSIS_BETA } from '../../src/cache/anthropic-diagnostics.js';
import { MID_CONVERSATION_TOOL_CHANGES_BETA } from '../../src/cache/anthropic-rules.js';
import { EPHEMERAL, EPHEMERAL_1H, MODES, messagesBody, send, startSim, tokensAt } from './helpers.js';

type Json = Record<string, unknown>;
const h = await startSim();

async function rejected(
  body: Json,
  headers?: Record<string, string>,
): Promise<{ status: number; type: string; message: string }> {
  try {
    await h.anthropic().messages.create(body as never, headers ? { headers } : undefined);
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

describe('Anthropic 400 rules', () => {
  it('allows at most four breakpoints', async () => {
    const r = await rejected(
      messagesBody(6, 50, { 0: EPHEMERAL, 1: EPHEMERAL, 2: EPHEMERAL, 3: EPHEMERAL, 4: EPHEMERAL }),
    );
    expect(r).toEqual({
      status: 400,
      type: 'invalid_request_error',
      message: 'A maximum of 4 blocks with cache_control may be provided. Found 5.',
    });
  });

  it('counts the automatic breakpoint: four explicit markers plus a top-level cache_control is a 400', async () => {
    const body = {
      ...messagesBody(6, 50, { 0: EPHEMERAL, 1: EPHEMERAL, 2: EPHEMERAL, 3: EPHEMERAL }),
      cache_control: EPHEMERAL,
    };
    expect((await rejected(body)).message).toMatch(
      /A maximum of 4 blocks with cache_control may be provided. Found 5/,
    );
  });

  it('rejects automatic caching when the last block is marked with a different TTL', async () => {
    const body = { ...messagesBody(3, 50, { 2: EPHEMERAL_1H }), cache_control: EPHEMERAL };
    expect((await rejected(body)).message).toMatch(/different ttl/);
  });

  it('rejects a 1h breakpoint after a 5m one', async () => {
    const r = await rejected(messagesBody(4, 50, { 1: EPHEMERAL, 3: EPHEMERAL_1H }));
    expect(r.status).toBe(400);
    expect(r.message).toMatch(/"1h" cannot come after a ttl of "5m"/);
  });

  it.each([
    [
      'a thinking block',
      { type: 'thinking', thinking: 'x', signature: 's', cache_control: EPHEMERAL },
      /thinking blocks/,
    ],
    ['an empty text block', { type: 'text', text: '', cache_control: EPHEMERAL }, /empty text block/],
  ])('rejects cache_control on %s', async (_name, block, message) => {
    const body = messagesBody(2, 50);
    (body.messages as Json[]).push({ role: 'assistant', content: [block] });
    expect((await rejected(body)).message).toMatch(message);
  });

  it('rejects cache_control on a deferred tool', async () => {
    const body = {
      ...messagesBody(1, 50),
      tools: [tool('a', { defer_loading: true, cache_control: EPHEMERAL })],
    };
    expect((await rejected(body)).message).toMatch(/defer_loading/);
  });

  it('rejects a tool_result that answers no tool_use, and a tool_use left unanswered', async () => {
    const orphan = {
      model: 'claude-opus-5',
      max_tokens: 10,
      messages: [{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_x', content: 'hi' }] }],
    };
    expect((await rejected(orphan)).message).toMatch(/unexpected `tool_use_id`/);
    const unanswered = {
      model: 'claude-opus-5',
      max_tokens: 10,
      messages: [
        { role: 'user', content: 'go' },
        { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'a', input: {} }] },
        { role: 'user', content: 'never mind' },
      ],
    };
    expect((await rejected(unanswered)).message).toMatch(/without `tool_result` blocks/);
  });

  it('requires model, max_tokens and messages', async () => {
    expect((await rejected({ max_tokens: 1, messages: [{ role: 'user', content: 'x' }] })).message).toMatch(
      /^model/,
    );
    expect(
      (await rejected({ model: 'claude-opus-5', messages: [{ role: 'user', content: 'x' }] })).message,
    ).toMatch(/^max_tokens/);
    expect((await rejected({ model: 'claude-opus-5', max_tokens: 1 })).message).toMatch(/^messages/);
  });
});

describe('mid-conversation system messages and tool changes', () => {
  const conversation = (model: string, system: Json, at: number) => {
    const body = messagesBody(4, 200, {}, model);
    (body.messages as Json[]).splice(at, 0, system);
    return body;
  };
  const note = { role: 'system', content: 'Plan mode is on.' };

  it.each(['claude-opus-5', 'claude-fable-5', 'claude-mythos-5', 'claude-opus-4-8', 'claude-fable-5-1'])(
    'accepts a system message after a user turn on %s',
    async (model) => {
      await expect(
        h.anthropic().messages.create(conversation(model, note, 1) as never),
      ).resolves.toBeDefined();
    },
  );

  it.each(['claude-sonnet-5', 'claude-haiku-4-5'])('rejects a system message on %s', async (model) => {
    expect((await rejected(conversation(model, note, 1))).message).toMatch(/not supported on/);
  });

  it('rejects a system message first, after an assistant turn, or before a user turn', async () => {
    expect((await rejected(conversation('claude-opus-5', note, 0))).message).toMatch(/cannot be the first/);
    expect((await rejected(conversation('claude-opus-5', note, 2))).message).toMatch(
      /must follow a user turn/,
    );
    const before = messagesBody(3, 50);
    (before.messages as Json[]).splice(1, 0, note, { role: 'user', content: 'again' });
    expect((await rejected(before)).message).toMatch(/followed by an assistant turn/);
  });

  it('rejects a system message between a tool_use and its tool_result', async () => {
    const body = {
      model: 'claude-opus-5',
      max_tokens: 10,
      tools: [tool('Read')],
      messages: [
        { role: 'user', content: 'read it' },
        { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'Read', input: {} }] },
        note,
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'ok' }] },
      ],
    };
    expect((await rejected(body)).status).toBe(400);
  });

  const addition = (name: string) => ({
    role: 'system',
    content: [{ type: 'tool_addition', tool: { type: 'tool_reference', name } }],
  });
  const beta = { 'anthropic-beta': MID_CONVERSATION_TOOL_CHANGES_BETA };

  it('requires the beta and a declared tool for tool_addition', async () => {
    const body = {
      ...conversation('claude-opus-5', addition('late'), 1),
      tools: [tool('Read'), tool('late', { defer_loading: true })],
    };
    expect((await rejected(body)).message).toMatch(/require the anthropic-beta header/);
    const undeclared = { ...conversation('claude-opus-5', addition('nope'), 1), tools: [tool('Read')] };
    expect((await rejected(undeclared, beta)).message).toMatch(/"nope" is not declared in tools/);
    await expect(h.anthropic().messages.create(body as never, { headers: beta })).resolves.toBeDefined();
    const removal = {
      ...conversation(
        'claude-opus-5',
        {
          role: 'system',
          content: [{ type: 'tool_removal', tool: { type: 'tool_reference', name: 'gone' } }],
        },
        1,
      ),
      tools: [tool('Read')],
    };
    expect((await rejected(removal, beta)).message).toMatch(/"gone" is not declared in tools/);
    const sonnet = { ...body, model: 'claude-sonnet-5' };
    expect((await rejected(sonnet, beta)).message).toMatch(/not supported on claude-sonnet-5/);
  });

  it.each(MODES)(
    'keeps the cached prefix when a tool is announced instead of added to tools (%s)',
    async (_m, stream) => {
      h.sim.reset();
      const tools = [tool('Read'), tool('late', { defer_loading: true })];
      const body = { ...messagesBody(5, 200, { 4: EPHEMERAL }), tools };
      await send(h.anthropic(), body, stream, beta);
      const next = structuredClone(body) as Json;
      const messages = next.messages as Json[];
      messages.push(
        { role: 'assistant', content: 'ok' },
        { role: 'user', content: 'use the late tool' },
        addition('late'),
      );
      const u = await send(h.anthropic(), next, stream, beta);
      expect(u.cache_read_input_tokens).toBe(tokensAt(body, 5, beta));
    },
  );
});

describe('cache diagnostics', () => {
  const beta = { 'anthropic-beta': CACHE_DIAGNOSIS_BETA };
  const ask = (body: Json, previous: string | null) => ({
    ...body,
    diagnostics: { previous_message_id: previous },
  });

  async function turn(body: Json, stream = false): Promise<{ id: string; diagnostics: unknown }> {
    const client = h.anthropic();
    const msg = stream
      ? await client.messages.stream(body as never, { headers: beta }).finalMessage()
      : await client.messages.create(body as never, { headers: beta });
    return msg as unknown as { id: string; diagnostics: unknown };
  }

  it.each(MODES)(
    'says null on a first turn and on an appended turn, and names what changed (%s)',
    async (_m, stream) => {
      const base: Json = {
        ...messagesBody(3, 200, { 2: EPHEMERAL }),
        system: 'You are terse.',
        tools: [tool('Read')],
      };
      const first = await turn(ask(base, null), stream);
      expect(first.diagnostics).toBeNull();
      const appended = structuredClone(base) as Json;
      (appended.messages as Json[]).push(
        { role: 'assistant', content: 'ok' },
        { role: 'user', content: 'more' },
      );
      expect((await turn(ask(appended, first.id), stream)).diagnostics).toBeNull();
      const cases: Array<[Json, string]> = [
        [{ ...base, system: 'You are verbose.' }, 'system_changed'],
        [{ ...base, tools: [tool('Read'), tool('Write')] }, 'tools_changed'],
        [{ ...base, model: 'claude-fable-5' }, 'model_changed'],
        [{ ...base, messages: (base.messages as Json[]).slice(1) }, 'messages_changed'],
      ];
      for (const [body, type] of cases) {
        const d = (await turn(ask(body, first.id), stream)).diagnostics as { cache_miss_reason: Json };
        expect(d.cache_miss_reason.type).toBe(type);
        expect(d.cache_miss_reason.cache_missed_input_tokens).toBeGreaterThan(0);
      }
      const unavailable = (await turn(ask({ ...base, tool_choice: { type: 'any' } }, first.id), stream))
        .diagnostics;
      expect(unavailable).toEqual({ cache_miss_reason: { type: 'unavailable' } });
      const unknown = (await turn(ask(base, 'msg_does_not_exist'), stream)).diagnostics;
      expect(unknown).toEqual({ cache_miss_reason: { type: 'previous_message_not_found' } });
    },
  );

  it('leaves diagnostics out when the beta is not sent', async () => {
    const msg = await h.anthropic().messages.create(ask(messagesBody(1, 10), null) as never);
    expect('diagnostics' in msg).toBe(false);
  });
});

describe('count_tokens', () => {
  it('counts the prefix without caching or max_tokens', async () => {
    h.sim.reset();
    const body = messagesBody(3, 200, { 2: EPHEMERAL });
    const { max_tokens: _m, ...rest } = body;
    const r = await h.anthropic().messages.countTokens(rest as never);
    expect(r.input_tokens).toBe(tokensAt(body, 2));
    expect(h.sim.stats().entries).toBe(0);
  });
});
