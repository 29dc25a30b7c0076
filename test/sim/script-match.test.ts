// A script's `match` in the first user message, the latest user message or any message, through the
// official SDKs; and `/_sim/reset` zeroing every counter, per provider included.

import { describe, expect, it } from 'vitest';
import { parseReplyScript } from '../../src/sim/reply-script.js';
import { MODES, startSim } from './helpers.js';

type Json = Record<string, unknown>;

const script = parseReplyScript(
  {
    conversations: [
      // Codex's first user message is always its <environment_context>: the task is in a later one.
      { match: 'TASK-LATEST', match_in: 'latest_user', turns: [{ text: 'latest 1' }, { text: 'latest 2' }] },
      { match: 'NEEDLE-ANY', match_in: 'any', turns: [{ text: 'any 1' }, { text: 'any 2' }] },
      { match: 'environment_context', turns: [{ text: 'first 1' }, { text: 'first 2' }] },
    ],
  },
  'inline',
);
const h = await startSim({ script });

const env = '<environment_context><cwd>/w</cwd></environment_context>';

describe('script match targets', () => {
  it.each(MODES)('Responses: latest user message, any message, else the first (%s)', async (_, stream) => {
    const send = async (input: Json[]) => {
      const body = { model: 'gpt-5.5', input } as never;
      const r = stream
        ? await h.openai().responses.stream(body).finalResponse()
        : await h.openai().responses.create(body);
      return r.output_text;
    };
    const user = (text: string) => ({ role: 'user', content: [{ type: 'input_text', text }] });
    // Only the first user message names `environment_context`, yet the latest one's task wins: it comes first.
    expect(await send([user(env), user('do TASK-LATEST now')])).toBe('latest 1');
    // Once the task is no longer the latest user message, the latest-user conversation stops matching.
    expect(
      await send([
        user(env),
        user('do TASK-LATEST now'),
        { role: 'assistant', content: 'ok' },
        user('and then?'),
      ]),
    ).toBe('first 2');
    // `any`: a tool output deep in the conversation holds the needle.
    expect(
      await send([
        user(env),
        { type: 'function_call', call_id: 'c1', name: 'read', arguments: '{}' },
        { type: 'function_call_output', call_id: 'c1', output: 'file says NEEDLE-ANY' },
      ]),
    ).toBe('any 2');
  });

  it.each(MODES)(
    'Messages: latest user message and any message, tool results included (%s)',
    async (_, stream) => {
      const send = async (messages: Json[]) => {
        const body = { model: 'claude-opus-5', max_tokens: 20, messages } as never;
        const r = stream
          ? await h.anthropic().messages.stream(body).finalMessage()
          : await h.anthropic().messages.create(body);
        return (r.content[0] as { text: string }).text;
      };
      expect(await send([{ role: 'user', content: 'TASK-LATEST' }])).toBe('latest 1');
      expect(
        await send([
          { role: 'user', content: 'hello' },
          { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'Read', input: {} }] },
          {
            role: 'user',
            content: [
              {
                type: 'tool_result',
                tool_use_id: 'toolu_1',
                content: [{ type: 'text', text: 'NEEDLE-ANY' }],
              },
            ],
          },
        ]),
      ).toBe('any 2');
      expect(await send([{ role: 'user', content: 'nothing scripted' }])).toBe('Simulated reply 1.');
    },
  );

  it('Chat Completions: the latest user message', async () => {
    const r = await h.openai().chat.completions.create({
      model: 'gpt-5.5',
      messages: [
        { role: 'system', content: 'be brief' },
        { role: 'user', content: 'hello' },
        { role: 'assistant', content: 'hi' },
        { role: 'user', content: 'TASK-LATEST please' },
      ],
    });
    expect(r.choices[0]?.message.content).toBe('latest 2');
  });

  it('rejects an unknown match target with the JSON path', () => {
    expect(() =>
      parseReplyScript({ conversations: [{ match: 'x', match_in: 'last', turns: [] }] }, 's.json'),
    ).toThrow('s.json: $.conversations[0].match_in: expected one of first_user, latest_user, any');
  });
});

describe('per-provider counters and /_sim/reset', () => {
  it('counts tokens per provider and zeroes every counter on reset', async () => {
    await fetch(`${h.url}/_sim/reset`, { method: 'POST', body: '{}' });
    const long = 'cache me '.repeat(3000);
    const body = {
      model: 'claude-opus-5',
      max_tokens: 10,
      system: [{ type: 'text', text: long, cache_control: { type: 'ephemeral' } }],
      messages: [{ role: 'user', content: 'hi' }],
    } as never;
    await h.anthropic().messages.create(body);
    await h.anthropic().messages.create(body);
    await h.openai().responses.create({ model: 'gpt-5.5', instructions: long, input: 'hi' });
    await h.openai().responses.create({ model: 'gpt-5.5', instructions: long, input: 'hi' });
    const stats = (await (await fetch(`${h.url}/_sim/stats`)).json()) as Record<string, Json> & Json;
    expect(stats.anthropic).toMatchObject({ requests: 2, cacheReads: 1, cacheWrites: 1 });
    expect(stats.anthropic?.writes).toBeGreaterThan(0);
    expect(stats.anthropic?.tokensWritten).toBeGreaterThan(2000);
    expect(stats.anthropic?.tokensRead).toBe(stats.anthropic?.tokensWritten);
    expect(stats.openai).toMatchObject({ requests: 2, cacheReads: 1, tokensWritten: 0 });
    expect(stats.openai?.tokensRead).toBeGreaterThan(0);
    expect(stats.tokensRead).toBe(Number(stats.anthropic?.tokensRead) + Number(stats.openai?.tokensRead));

    expect((await fetch(`${h.url}/_sim/reset`, { method: 'POST', body: '{}' })).status).toBe(200);
    const zero = (await (await fetch(`${h.url}/_sim/stats`)).json()) as Record<string, Json> & Json;
    for (const p of ['anthropic', 'openai']) {
      expect(Object.values(zero[p] as Json).every((v) => v === 0)).toBe(true);
    }
    expect(zero).toMatchObject({ requests: 0, tokensRead: 0, tokensWritten: 0, cacheReads: 0, entries: 0 });
  });
});
