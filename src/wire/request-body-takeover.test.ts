// parseRequestBody with a previous body takes over only what is the same, and still checks UTF-8.
// Pure.

import { describe, expect, it } from 'vitest';
import { agentConversation, appendUserTurn } from '../sim/agent-conversation.js';
import { parseRequestBody, type RequestBody, type WireFormat } from './request-body.js';

type Json = Record<string, unknown>;
const bytes = (v: Json) => Buffer.from(JSON.stringify(v));
// Units without their nodes (a fresh scan makes new node objects with the same spans).
const plain = (b: RequestBody) => b.units.map(({ node: _n, ...u }) => u);

describe('parseRequestBody with a previous body', () => {
  it('takes over the units of the messages the scan took over, and reads the new ones', () => {
    let conv = agentConversation({ turns: 3, seed: 3 });
    let prev = parseRequestBody(bytes(conv), { format: 'anthropic-messages' });
    for (let t = 0; t < 3; t++) {
      conv = appendUserTurn(conv, `more ${t}`);
      const next = parseRequestBody(bytes(conv), { format: 'anthropic-messages', previous: prev });
      const fresh = parseRequestBody(bytes(conv), { format: 'anthropic-messages' });
      expect(plain(next)).toEqual(plain(fresh));
      // The first message's units are the previous body's objects; the new turn's are not.
      const first = next.units.find((u) => u.level === 'messages');
      expect(prev.units).toContain(first);
      expect(prev.units).not.toContain(next.units[next.units.length - 1]);
      prev = next;
    }
  });

  it('reads everything again when the previous body is of another message key or its messages changed', () => {
    const chat = {
      model: 'gpt-5',
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'hi', name: 'x' },
        {
          role: 'assistant',
          content: null,
          tool_calls: [{ id: 'a', type: 'function', function: { name: 'f' } }],
        },
      ],
    };
    const formats: WireFormat[] = ['openai-chat', 'anthropic-messages'];
    for (const format of formats) {
      const prev = parseRequestBody(bytes(chat), { format: 'openai-chat' });
      const longer = { ...chat, messages: [...chat.messages, { role: 'user', content: 'again' }] };
      const next = parseRequestBody(bytes(longer), { format, previous: prev });
      expect(plain(next)).toEqual(plain(parseRequestBody(bytes(longer), { format })));
    }
    const responses = { model: 'gpt-5', input: [{ role: 'user', content: 'hi' }] };
    const prev = parseRequestBody(bytes(responses), { format: 'openai-responses' });
    const changed = { ...responses, input: [{ role: 'user', content: 'ho' }, { type: 'reasoning' }] };
    const next = parseRequestBody(bytes(changed), { format: 'openai-responses', previous: prev });
    expect(plain(next)).toEqual(plain(parseRequestBody(bytes(changed), { format: 'openai-responses' })));
    expect(prev.units).not.toContain(next.units[0]);
  });
});

describe('the UTF-8 check after a previous body', () => {
  const body = (text: string) =>
    Buffer.from(JSON.stringify({ model: 'm', messages: [{ role: 'user', content: text }] }));
  it('still refuses a broken character that starts in the shared bytes', () => {
    const prev = parseRequestBody(body('caf\u00e9 ok'), { format: 'anthropic-messages' });
    // Same lead byte (0xc3), then a byte that cannot follow it.
    const broken = body('caf\u00e9 ok');
    const at = broken.indexOf(0xa9);
    broken[at] = 0x41;
    expect(() => parseRequestBody(broken, { format: 'anthropic-messages', previous: prev })).toThrow(
      /not valid UTF-8/,
    );
    // A different character with the same lead byte is fine.
    const other = parseRequestBody(body('caf\u00ea ok'), { format: 'anthropic-messages', previous: prev });
    expect(other.units.length).toBe(1);
    // An invalid byte past the shared bytes is refused too.
    const tail = Buffer.concat([
      body('caf\u00e9 ok').subarray(0, -3),
      Buffer.from([0xff]),
      Buffer.from('"}]}'),
    ]);
    expect(() => parseRequestBody(tail, { format: 'anthropic-messages', previous: prev })).toThrow(
      /not valid UTF-8/,
    );
  });
});
