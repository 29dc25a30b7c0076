import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { agentConversation } from '../demo/agent-conversation.js';
import { parseRequestBody } from '../wire/request-body.js';
import { spliceBody, splicedFrom } from './splice-body.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

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

describe('splicedFrom', () => {
  it('names the source and where its tail sits, and does not keep the source alive', async () => {
    const text = JSON.stringify(agentConversation({ turns: 2, seed: 3 }));
    const [out, source] = ((body) => {
      const spliced = spliceBody(body, { setText: { tools: '[]' } }) as Buffer;
      const s = splicedFrom(spliced);
      expect(s?.source).toBe(body);
      // The source's bytes from `tailFrom` on are the spliced body's from `head` on.
      expect(spliced.subarray(s?.head).equals(body.bytes.subarray(s?.tailFrom))).toBe(true);
      return [spliced, new WeakRef(body)] as const;
    })(parseRequestBody(Buffer.from(text), { format: 'anthropic-messages' }));
    await new Promise((r) => setTimeout(r, 0));
    gc();
    expect(source.deref()).toBeUndefined();
    expect(splicedFrom(out)).toBeUndefined();
  });
});
