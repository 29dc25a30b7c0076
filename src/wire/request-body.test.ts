// parseRequestBody reads each provider format into units with exact byte spans, keeping unknown fields.
// Pure.

import { describe, expect, it } from 'vitest';
import { anthropicFixture, openaiChatFixture, openaiResponsesFixture } from '../../test/fixtures/requests.js';
import { JsonSyntaxError, WireFormatError } from '../core/errors.js';
import { agentConversation, appendUserTurn } from '../sim/agent-conversation.js';
import { detectBodyFormat, formatFromRoute, parseRequestBody } from './request-body.js';

const text = (bytes: Uint8Array, span: { start: number; end: number }) =>
  new TextDecoder().decode(bytes.subarray(span.start, span.end));

describe('parseRequestBody', () => {
  it('reads an Anthropic body into tool, system and message units with exact byte spans', () => {
    const raw = JSON.stringify(anthropicFixture(), null, 2);
    const body = parseRequestBody(raw, { headers: { 'anthropic-beta': 'b2, b1', authorization: 'secret' } });
    expect(body.format).toBe('anthropic-messages');
    const levels = body.units.map((u) => u.level);
    expect(levels.filter((l) => l === 'tools')).toHaveLength(4);
    expect(levels.filter((l) => l === 'system')).toHaveLength(2);
    expect(levels.filter((l) => l === 'messages')).toHaveLength(8);
    for (const u of body.units) expect(JSON.parse(text(body.bytes, u.span))).toBeDefined();
    const first = body.units.find((u) => u.level === 'messages');
    expect(text(body.bytes, first?.span ?? { start: 0, end: 0 })).toBe(
      '"What\'s the weather in Paris? Here is a photo."',
    );
    expect(body.betas).toEqual(['b1', 'b2']);
    expect(JSON.stringify(body)).not.toContain('secret');
  });

  it.each([
    ['a byte that never occurs in UTF-8', [0xff], 0],
    ['a lone continuation byte', [0x80], 0],
    ['a truncated sequence', [0xe2, 0x82, 0x22], 0],
    ['an overlong encoding', [0xc0, 0xaf], 0],
    ['a UTF-16 surrogate', [0xed, 0xa0, 0x80], 0],
  ])('refuses invalid UTF-8 (%s) at its exact byte, never replacing it', (_name, bad, rel) => {
    const head = Buffer.from('{"model":"m","messages":[{"role":"user","content":"ok ');
    const bytes = Buffer.concat([head, Buffer.from(bad), Buffer.from(' x"}]}')]);
    let thrown: unknown;
    try {
      parseRequestBody(bytes, { format: 'anthropic-messages' });
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(JsonSyntaxError);
    expect((thrown as JsonSyntaxError).position.offset).toBe(head.length + rel);
    expect((thrown as JsonSyntaxError).message).toMatch(/not valid UTF-8/);
    // Valid multi-byte text right beside it is fine.
    expect(parseRequestBody(Buffer.concat([head, Buffer.from('é€😀 x"}]}')])).units).toHaveLength(1);
  });

  it('keeps unknown fields: value() is the whole body', () => {
    const fixture = anthropicFixture();
    const body = parseRequestBody(JSON.stringify(fixture));
    expect(body.value()).toEqual(fixture);
    expect(body.fields.future_field).toEqual({ kept: true });
  });

  it('reads OpenAI Chat messages, content parts and tool calls', () => {
    const body = parseRequestBody(JSON.stringify(openaiChatFixture()));
    expect(body.format).toBe('openai-chat');
    const forms = body.units.map((u) => `${u.level}:${u.form}:${u.messageIndex ?? '-'}`);
    expect(forms).toEqual([
      'tools:tool:-',
      'messages:content:0',
      'messages:content:1',
      'messages:content:1',
      'messages:tool_call:2',
      'messages:content:3',
      'messages:content:4',
    ]);
    expect(body.units[5]?.messageHeader).toBe('{"tool_call_id":"call_1"}');
  });

  it('reads OpenAI Responses instructions and input items', () => {
    const body = parseRequestBody(JSON.stringify(openaiResponsesFixture()));
    expect(body.format).toBe('openai-responses');
    expect(body.units.map((u) => `${u.level}:${u.form}`)).toEqual([
      'tools:tool',
      'system:text',
      'messages:content',
      'messages:item',
      'messages:item',
      'messages:item',
      'messages:content',
    ]);
  });

  it('takes the format from the route when given', () => {
    expect(formatFromRoute('/v1/messages')).toBe('anthropic-messages');
    expect(formatFromRoute('/v1/messages/count_tokens')).toBe('anthropic-messages');
    expect(formatFromRoute('/v1/chat/completions?x=1')).toBe('openai-chat');
    expect(formatFromRoute('/v1/responses')).toBe('openai-responses');
    expect(formatFromRoute('/v1/models')).toBeUndefined();
    const body = parseRequestBody('{"model":"m","messages":[]}', { route: '/v1/chat/completions' });
    expect(body.format).toBe('openai-chat');
  });

  it('names the path and position of a body of the wrong shape', () => {
    expect(() => parseRequestBody('[1]')).toThrow(WireFormatError);
    expect(() => parseRequestBody('{"model":"m"}', { format: 'anthropic-messages' })).toThrow(
      /\$\.messages.*Field required/,
    );
    try {
      parseRequestBody('{"model":"m",\n"messages":[{"role":"user","content":5}]}');
      expect.fail('should throw');
    } catch (e) {
      expect(e).toBeInstanceOf(WireFormatError);
      expect((e as WireFormatError).path).toBe('$.messages[0].content');
      expect((e as WireFormatError).position?.line).toBe(2);
    }
  });

  it('reports malformed JSON inside a leaf at its exact position', () => {
    const raw = '{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a\tb"}]}]}';
    try {
      parseRequestBody(raw).value();
      expect.fail('should throw');
    } catch (e) {
      expect(e).toBeInstanceOf(JsonSyntaxError);
      expect((e as JsonSyntaxError).position.column).toBe(raw.indexOf('\t') + 1);
      expect((e as JsonSyntaxError).message).toContain('control character');
    }
  });
});

describe('detectBodyFormat', () => {
  const enc = (v: unknown) => new TextEncoder().encode(JSON.stringify(v));
  it('names the format a body shows, and says when nothing tells the formats apart', () => {
    expect(
      detectBodyFormat(
        enc({ model: 'm', system: 's', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }),
      ),
    ).toEqual({ format: 'anthropic-messages', decisive: true });
    expect(
      detectBodyFormat(
        enc({
          model: 'm',
          messages: [
            { role: 'system', content: 's' },
            { role: 'user', content: 'x' },
          ],
        }),
      ),
    ).toEqual({ format: 'openai-chat', decisive: true });
    expect(detectBodyFormat(enc({ model: 'm', input: 'x' }))).toEqual({
      format: 'openai-responses',
      decisive: true,
    });
    expect(detectBodyFormat(enc({ model: 'm', messages: [{ role: 'user', content: 'x' }] }))).toEqual({
      format: 'anthropic-messages',
      decisive: false,
    });
  });
});

describe('parseRequestBody with a previous body', () => {
  const base = JSON.stringify(agentConversation({ turns: 4 }));
  const extended = JSON.stringify(appendUserTurn(agentConversation({ turns: 4 }), 'more'));
  const pairs: Array<[string, string, string]> = [
    ['an appended turn', base, extended],
    ['the same body', base, base],
    ['a shorter body', extended, base],
    ['whitespace in the new part', base, `${base.slice(0, -2)} ]}`],
    ['an escape in the new part', base, base.replace(/"messages":\[/, '"x":"\\u0041","messages":[')],
    ['a repeated key at the end', base, `${base.slice(0, -1)},"model":"again"}`],
    ['a different first byte', base, ` ${base}`],
  ];
  it.each(pairs)('%s: the same nodes and units as a scan from scratch', (_name, before, after) => {
    const previous = parseRequestBody(before);
    const got = parseRequestBody(after, { previous });
    const want = parseRequestBody(after);
    expect(got.root).toEqual(want.root);
    expect(got.units).toEqual(want.units);
    expect(got.fields).toEqual(want.fields);
  });

  it('takes over the nodes of the shared leading bytes', () => {
    const previous = parseRequestBody(base);
    const got = parseRequestBody(extended, { previous });
    expect(got.root.members.get('tools')).toBe(previous.root.members.get('tools'));
    const items = (b: typeof got) => (b.root.members.get('messages') as { items: unknown[] }).items;
    // Every message but the last (it lost its cache marker) is the earlier scan's node.
    const shared = items(got).filter((m, i) => m === items(previous)[i]).length;
    expect(shared).toBe(items(previous).length - 1);
  });

  it('still reports an error in the new part', () => {
    const previous = parseRequestBody(base);
    expect(() => parseRequestBody(`${base.slice(0, -2)},{]}`, { previous })).toThrow();
  });
});
