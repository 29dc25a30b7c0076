// Scripted custom (freeform), namespaced and tool-search calls on the Responses API, as the openai SDK
// parses them whole and streamed; and the precise refusal where another API has no such call.

import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { parseReplyScript, ReplyScriptError } from '../../src/sim/reply-script.js';
import { MODES, startSim } from './helpers.js';

type Json = Record<string, unknown>;

const PATCH = '*** Begin Patch\n*** Update File: a.txt\n@@\n-hello\n+hello, patched\n*** End Patch\n';

const script = parseReplyScript(
  {
    conversations: [
      {
        match: 'edit a.txt',
        turns: [
          {
            text: 'Editing.',
            tool_calls: [{ type: 'custom', name: 'apply_patch', input: PATCH, id: 'call_p1' }],
          },
          { text: 'Patched.' },
        ],
      },
      {
        match: 'look it up',
        turns: [
          { tool_calls: [{ type: 'tool_search', input: { query: 'lookup word', limit: 8 } }] },
          { tool_calls: [{ name: 'lookup', namespace: 'mcp__fixture', input: { word: 'cache' } }] },
          { text: 'Found it.' },
        ],
      },
    ],
  },
  'inline',
);
const h = await startSim({ script });

// Codex declares its freeform tool and (after a tool search) its MCP tools like this.
const tools = [
  {
    type: 'custom',
    name: 'apply_patch',
    description: 'Edits files. A FREEFORM tool.',
    format: { type: 'grammar', syntax: 'lark', definition: 'start: /(.|\\n)+/' },
  },
  {
    type: 'namespace',
    name: 'mcp__fixture',
    description: 'Tools in the mcp__fixture namespace.',
    tools: [{ type: 'function', name: 'lookup', parameters: { type: 'object', properties: {} } }],
  },
];

async function respond(
  client: OpenAI,
  body: Json,
  stream: boolean,
): Promise<{ out: Json; events: string[] }> {
  if (!stream) return { out: (await client.responses.create(body as never)) as unknown as Json, events: [] };
  const s = client.responses.stream(body as never);
  const events: string[] = [];
  s.on('event', (e) => events.push(e.type));
  return { out: (await s.finalResponse()) as unknown as Json, events };
}

describe('Responses: custom, namespaced and tool-search calls', () => {
  it.each(MODES)('plays a freeform custom_tool_call and counts it as a turn (%s)', async (_, stream) => {
    const input: Json[] = [{ role: 'user', content: 'please edit a.txt' }];
    const first = await respond(h.openai(), { model: 'gpt-5.5', input, tools }, stream);
    const output = first.out.output as Json[];
    expect(output.map((o) => o.type)).toEqual(['message', 'custom_tool_call']);
    expect(output[1]).toEqual({
      type: 'custom_tool_call',
      id: expect.stringMatching(/^ctc_/),
      status: 'completed',
      call_id: 'call_p1',
      name: 'apply_patch',
      input: PATCH,
    });
    if (stream) {
      // The SDK accumulates the input from these deltas: its final input equals the whole patch.
      expect(first.events).toContain('response.custom_tool_call_input.delta');
      expect(first.events).toContain('response.custom_tool_call_input.done');
      expect(
        first.events.filter((e) => e === 'response.custom_tool_call_input.delta').length,
      ).toBeGreaterThan(1);
    }
    input.push(...output, { type: 'custom_tool_call_output', call_id: 'call_p1', output: 'Success.' });
    const second = await respond(h.openai(), { model: 'gpt-5.5', input, tools }, stream);
    expect(second.out.output_text).toBe('Patched.');
  });

  it.each(MODES)('plays a tool search, then a call to a tool inside a namespace (%s)', async (_, stream) => {
    const input: Json[] = [{ role: 'user', content: 'look it up please' }];
    const first = await respond(h.openai(), { model: 'gpt-5.5', input, tools: tools.slice(0, 1) }, stream);
    const search = (first.out.output as Json[])[0] as Json;
    expect(search).toEqual({
      type: 'tool_search_call',
      id: expect.stringMatching(/^tsc_/),
      call_id: expect.stringMatching(/^call_/),
      execution: 'client',
      status: 'completed',
      arguments: { query: 'lookup word', limit: 8 },
    });
    input.push(search, {
      type: 'tool_search_output',
      call_id: search.call_id,
      execution: 'client',
      status: 'completed',
      tools: [tools[1]],
    });
    const second = await respond(h.openai(), { model: 'gpt-5.5', input, tools: tools.slice(0, 1) }, stream);
    const call = (second.out.output as Json[])[0] as Json;
    expect(call).toMatchObject({
      type: 'function_call',
      name: 'lookup',
      namespace: 'mcp__fixture',
      arguments: '{"word":"cache"}',
      status: 'completed',
    });
    if (stream) expect(second.events).toContain('response.function_call_arguments.delta');
    input.push(call, { type: 'function_call_output', call_id: call.call_id, output: 'a word' });
    const third = await respond(h.openai(), { model: 'gpt-5.5', input, tools: tools.slice(0, 1) }, stream);
    expect(third.out.output_text).toBe('Found it.');
  });

  it('refuses, naming why, to play a custom call on Chat Completions or Messages', async () => {
    const chat = await h
      .openai()
      .chat.completions.create({ model: 'gpt-5.5', messages: [{ role: 'user', content: 'edit a.txt' }] })
      .catch((e: unknown) => e);
    expect(chat).toBeInstanceOf(OpenAI.APIError);
    expect((chat as InstanceType<typeof OpenAI.APIError>).status).toBe(500);
    expect(String((chat as Error).message)).toMatch(
      /a custom tool call here, which only the Responses API has/,
    );
    const msg = await h
      .anthropic()
      .messages.create({
        model: 'claude-opus-5',
        max_tokens: 10,
        messages: [{ role: 'user', content: 'look it up' }],
      })
      .catch((e: unknown) => e);
    expect(msg).toBeInstanceOf(Anthropic.APIError);
    expect(String((msg as Error).message)).toMatch(
      /a tool_search tool call here, .* the Messages API cannot send it/,
    );
  });

  it('rejects malformed tool calls in a script with the JSON path', () => {
    const bad = (call: unknown) => () =>
      parseReplyScript({ conversations: [{ turns: [{ tool_calls: [call] }] }] }, 's.json');
    expect(bad({ type: 'custom', name: 'apply_patch', input: { patch: 1 } })).toThrow(
      /s.json: \$.conversations\[0\].turns\[0\].tool_calls\[0\].input: a custom tool call takes its freeform input as a string/,
    );
    expect(bad({ type: 'mcp', name: 'x' })).toThrow(
      /tool_calls\[0\].type: expected one of function, custom, tool_search/,
    );
    expect(bad({ name: 'x', namespace: 3 })).toThrow(ReplyScriptError);
    expect(bad({ name: 'x', args: {} })).toThrow(/tool_calls\[0\].args: unknown field/);
    expect(bad({ type: 'tool_search', input: { query: 'q' } })).not.toThrow();
  });
});
