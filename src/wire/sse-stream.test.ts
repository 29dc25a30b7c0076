// The SSE readers rebuild messages, usage and stop reasons from any chunking of the stream.
// Pure: streams are made in memory.

import { describe, expect, it } from 'vitest';
import { StreamFormatError } from '../core/errors.js';
import { createStreamReader, parseStream } from './sse-stream.js';

const sse = (events: Array<[string | undefined, unknown]>) =>
  events
    .map(([e, d]) => `${e ? `event: ${e}\n` : ''}data: ${typeof d === 'string' ? d : JSON.stringify(d)}\n\n`)
    .join('');

const anthropicStream = sse([
  [
    'message_start',
    {
      type: 'message_start',
      message: {
        id: 'msg_1',
        type: 'message',
        role: 'assistant',
        content: [],
        model: 'claude-opus-5',
        stop_reason: null,
        stop_sequence: null,
        usage: {
          input_tokens: 25,
          cache_creation_input_tokens: 1000,
          cache_read_input_tokens: 2000,
          cache_creation: { ephemeral_5m_input_tokens: 400, ephemeral_1h_input_tokens: 600 },
          output_tokens: 1,
        },
      },
    },
  ],
  [
    'content_block_start',
    { type: 'content_block_start', index: 0, content_block: { type: 'thinking', thinking: '' } },
  ],
  [
    'content_block_delta',
    { type: 'content_block_delta', index: 0, delta: { type: 'thinking_delta', thinking: 'Let me ' } },
  ],
  [
    'content_block_delta',
    { type: 'content_block_delta', index: 0, delta: { type: 'thinking_delta', thinking: 'think.' } },
  ],
  [
    'content_block_delta',
    { type: 'content_block_delta', index: 0, delta: { type: 'signature_delta', signature: 'sig' } },
  ],
  ['content_block_stop', { type: 'content_block_stop', index: 0 }],
  ['ping', { type: 'ping' }],
  [
    'content_block_start',
    { type: 'content_block_start', index: 1, content_block: { type: 'text', text: '' } },
  ],
  [
    'content_block_delta',
    { type: 'content_block_delta', index: 1, delta: { type: 'text_delta', text: 'Héllo' } },
  ],
  ['content_block_stop', { type: 'content_block_stop', index: 1 }],
  [
    'content_block_start',
    {
      type: 'content_block_start',
      index: 2,
      content_block: { type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: {} },
    },
  ],
  [
    'content_block_delta',
    {
      type: 'content_block_delta',
      index: 2,
      delta: { type: 'input_json_delta', partial_json: '{"location": "Pa' },
    },
  ],
  [
    'content_block_delta',
    { type: 'content_block_delta', index: 2, delta: { type: 'input_json_delta', partial_json: 'ris"}' } },
  ],
  ['content_block_stop', { type: 'content_block_stop', index: 2 }],
  [
    'message_delta',
    {
      type: 'message_delta',
      delta: { stop_reason: 'tool_use', stop_sequence: null },
      usage: { output_tokens: 89 },
    },
  ],
  ['message_stop', { type: 'message_stop' }],
]);

describe('Anthropic streams', () => {
  it('rebuilds the message, usage and stop reason', () => {
    const s = parseStream('anthropic-messages', anthropicStream);
    expect(s.complete).toBe(true);
    expect(s.id).toBe('msg_1');
    expect(s.stopReason).toBe('tool_use');
    expect(s.message?.content).toEqual([
      { type: 'thinking', thinking: 'Let me think.', signature: 'sig' },
      { type: 'text', text: 'Héllo' },
      { type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { location: 'Paris' } },
    ]);
    expect(s.usage?.output_tokens).toBe(89);
    expect(s.normalizedUsage).toEqual({
      inputTotal: 3025,
      cacheRead: 2000,
      cacheWrite: 1000,
      cacheWrite5m: 400,
      cacheWrite1h: 600,
      uncached: 25,
      output: 89,
      cacheReported: true,
    });
  });

  it('reads the same stream fed one byte at a time, splitting UTF-8 characters', () => {
    const bytes = new TextEncoder().encode(anthropicStream);
    const events: string[] = [];
    const reader = createStreamReader('anthropic-messages', (e) => events.push(String(e.event)));
    for (let i = 0; i < bytes.length; i++) reader.push(bytes.subarray(i, i + 1));
    const s = reader.end();
    expect(events).toHaveLength(16);
    expect(s.message?.content).toEqual(parseStream('anthropic-messages', anthropicStream).message?.content);
  });

  it('reads bytes as a TextDecoder would: a leading BOM dropped, invalid UTF-8 replaced, a byte at a time', () => {
    const text = new TextEncoder().encode(anthropicStream.replace('Héllo', 'Héllo 😀'));
    // A BOM first and two invalid sequences in a text delta's JSON string.
    const bytes = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(text)]);
    const at = bytes.indexOf(' 😀');
    const bad = Buffer.concat([
      bytes.subarray(0, at),
      Buffer.from([0xe2, 0x28, 0xa1, 0xc0, 0xaf]),
      bytes.subarray(at),
    ]);
    const expected = parseStream('anthropic-messages', new TextDecoder().decode(bad));
    const names: Array<string | undefined> = [];
    const reader = createStreamReader('anthropic-messages', (e) => names.push(e.event));
    for (let i = 0; i < bad.length; i++) reader.push(bad.subarray(i, i + 1));
    const s = reader.end();
    expect(s).toEqual(expected);
    // The first event keeps its name (a BOM left in would make its first line an unknown field).
    expect(names[0]).toBe('message_start');
    expect(s.events).toBe(parseStream('anthropic-messages', anthropicStream).events);
    expect(JSON.stringify(s.message?.content)).toContain('Héllo\ufffd(\ufffd\ufffd\ufffd 😀');
  });

  it('records an error event and an incomplete stream', () => {
    const text =
      anthropicStream.split('event: message_delta')[0] +
      sse([['error', { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } }]]);
    const s = parseStream('anthropic-messages', text);
    expect(s.complete).toBe(false);
    expect(s.error).toEqual({ type: 'overloaded_error', message: 'Overloaded' });
  });

  it('names the event whose data is not JSON', () => {
    expect(() => parseStream('anthropic-messages', 'event: ping\ndata: {oops\n\n')).toThrow(
      StreamFormatError,
    );
    expect(() =>
      parseStream('anthropic-messages', 'event: ping\ndata: {"type":"ping"}\n\nevent: x\ndata: [1\n\n'),
    ).toThrow(/event 1/);
  });
});

describe('OpenAI streams', () => {
  it('rebuilds a Chat completion with tool calls and the include_usage chunk', () => {
    const chunk = (delta: unknown, finish: string | null = null) => ({
      id: 'chatcmpl-1',
      object: 'chat.completion.chunk',
      created: 1,
      model: 'gpt-5.4',
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
    });
    const text = sse([
      [undefined, chunk({ role: 'assistant', content: '' })],
      [undefined, chunk({ content: 'Hi' })],
      [
        undefined,
        chunk({
          tool_calls: [
            { index: 0, id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '' } },
          ],
        }),
      ],
      [undefined, chunk({ tool_calls: [{ index: 0, function: { arguments: '{"location":' } }] })],
      [undefined, chunk({ tool_calls: [{ index: 0, function: { arguments: '"Paris"}' } }] })],
      [undefined, chunk({}, 'tool_calls')],
      [
        undefined,
        {
          id: 'chatcmpl-1',
          object: 'chat.completion.chunk',
          created: 1,
          model: 'gpt-5.4',
          choices: [],
          usage: {
            prompt_tokens: 2006,
            completion_tokens: 300,
            total_tokens: 2306,
            prompt_tokens_details: { cached_tokens: 1920 },
          },
        },
      ],
      [undefined, '[DONE]'],
    ]);
    const s = parseStream('openai-chat', text);
    expect(s.complete).toBe(true);
    expect(s.stopReason).toBe('tool_calls');
    expect(s.message).toEqual({
      role: 'assistant',
      content: 'Hi',
      tool_calls: [
        {
          id: 'call_1',
          type: 'function',
          function: { name: 'get_weather', arguments: '{"location":"Paris"}' },
        },
      ],
    });
    expect(s.normalizedUsage).toMatchObject({
      inputTotal: 2006,
      cacheRead: 1920,
      uncached: 86,
      output: 300,
      cacheReported: true,
    });
  });

  it('reads a Responses stream up to response.completed', () => {
    const response = {
      id: 'resp_1',
      object: 'response',
      model: 'gpt-5.6',
      status: 'completed',
      output: [],
      usage: {
        input_tokens: 5000,
        input_tokens_details: { cached_tokens: 3000, cache_write_tokens: 1500 },
        output_tokens: 20,
      },
    };
    const text = sse([
      [
        'response.created',
        {
          type: 'response.created',
          sequence_number: 0,
          response: { ...response, status: 'in_progress', usage: null },
        },
      ],
      ['response.output_text.delta', { type: 'response.output_text.delta', sequence_number: 1, delta: 'Hi' }],
      ['response.completed', { type: 'response.completed', sequence_number: 2, response }],
    ]);
    const s = parseStream('openai-responses', text);
    expect(s.complete).toBe(true);
    expect(s.stopReason).toBe('completed');
    expect(s.normalizedUsage).toMatchObject({
      inputTotal: 5000,
      cacheRead: 3000,
      cacheWrite: 1500,
      uncached: 500,
    });
  });

  it('says "not reported" for usage without cache fields', () => {
    const s = parseStream(
      'openai-chat',
      sse([[undefined, { id: 'x', choices: [], usage: { prompt_tokens: 10, completion_tokens: 2 } }]]),
    );
    expect(s.normalizedUsage?.cacheReported).toBe(false);
  });
});
