import { describe, expect, it } from 'vitest';
import { agentConversation } from '../demo/agent-conversation.js';
import { parseRequestBody } from '../wire/request-body.js';
import { spliceBody } from './splice-body.js';

type Json = Record<string, unknown>;

/** What the whole-body rewrite writes: parse, spread the new fields, insert the messages. */
function rewritten(text: string, set: Json, insert: Array<{ before: number; message: Json }>): string {
  const body = JSON.parse(text) as Json;
  const messages = body.messages as Json[];
  const out: Json[] = [];
  for (let i = 0; i <= messages.length; i++) {
    for (const x of insert) if (x.before === i) out.push(x.message);
    if (i < messages.length) out.push(messages[i] as Json);
  }
  return JSON.stringify({ ...body, ...set, messages: out });
}

const announce = (name: string): Json => ({
  role: 'system',
  content: [{ type: 'tool_addition', tool: { type: 'tool_reference', name } }],
});

describe('spliceBody', () => {
  const conv = agentConversation({ turns: 3 });
  const { tools: _tools, ...noTools } = conv;
  const cases: Array<[string, Json, Json, Array<{ before: number; message: Json }>]> = [
    ['tools replaced', conv, { tools: [{ name: 'a' }] }, []],
    ['tools appended when absent', noTools, { tools: [{ name: 'a' }] }, []],
    [
      'a message inserted in the middle and at the end',
      conv,
      { tools: [] },
      [
        { before: 2, message: announce('x') },
        { before: 13, message: announce('y') },
        { before: 13, message: announce('z') },
      ],
    ],
    ['into an empty history', { model: 'm', messages: [] }, {}, [{ before: 0, message: announce('x') }]],
    [
      'unicode and escapes JSON.stringify keeps',
      { model: 'm', messages: [{ role: 'user', content: 'é "q" \\ \n 😀' }] },
      { tools: [1.5] },
      [{ before: 0, message: announce('é') }],
    ],
  ];
  it.each(cases)('%s: the same bytes as the whole-body rewrite', (_name, body, set, insert) => {
    const text = JSON.stringify(body);
    const out = spliceBody(parseRequestBody(text), { set, insert });
    expect(out?.toString()).toBe(rewritten(text, set, insert));
  });

  it.each(cases)(
    '%s: the same bytes with the new fields given as their JSON text',
    (_n, body, set, insert) => {
      const text = JSON.stringify(body);
      const setText = Object.fromEntries(Object.entries(set).map(([k, v]) => [k, JSON.stringify(v)]));
      const out = spliceBody(parseRequestBody(text), { setText, insert });
      expect(out?.toString()).toBe(rewritten(text, set, insert));
    },
  );

  it.each([
    ['whitespace', '{"model": "m","messages":[]}'],
    ['an escape JSON.stringify rewrites', '{"model":"\\u006d","messages":[]}'],
    ['a repeated key', '{"model":"m","model":"n","messages":[]}'],
    ['a number JSON.stringify rewrites', '{"model":"m","max_tokens":1.0,"messages":[]}'],
  ])('refuses a body with %s (the caller writes the parsed value)', (_name, text) => {
    expect(spliceBody(parseRequestBody(text), { set: { tools: [] } })).toBeUndefined();
  });

  it('refuses an insertion past the history', () => {
    const text = JSON.stringify({ model: 'm', messages: [] });
    expect(spliceBody(parseRequestBody(text), { insert: [{ before: 1, message: {} }] })).toBeUndefined();
  });
});
