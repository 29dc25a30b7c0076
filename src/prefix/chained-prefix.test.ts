import { describe, expect, it } from 'vitest';
import { PrefixBuilder } from './build-prefix.js';
import { chainedBody, chainPrefix } from './chained-prefix.js';

type Json = Record<string, unknown>;
const b = new PrefixBuilder();
const parse = (body: Json) => b.parse(JSON.stringify(body), { format: 'openai-responses' });
const reply = (id: string, text: string) => ({
  type: 'message',
  id,
  status: 'completed',
  role: 'assistant',
  content: [{ type: 'output_text', text, annotations: [], logprobs: [] }],
});

describe('chainPrefix', () => {
  const tools = [{ type: 'function', name: 'f', parameters: { type: 'object' } }];
  const first = { model: 'gpt-5.6', instructions: 'be brief', tools, input: 'what is 2+2?' };
  const out1 = [
    reply('msg_1', '4'),
    { type: 'function_call', id: 'fc_1', call_id: 'c1', name: 'f', arguments: '{}' },
  ];

  it('is the prefix of the conversation resent in full (instructions and tools from the chained request)', () => {
    const chained = {
      model: 'gpt-5.6',
      instructions: 'be brief',
      tools,
      previous_response_id: 'resp_1',
      input: [{ type: 'function_call_output', call_id: 'c1', output: 'ok' }],
      store: true,
    };
    const full = chainPrefix(b, parse(first), out1, parse(chained));
    const resent = parse({
      model: 'gpt-5.6',
      instructions: 'be brief',
      tools,
      input: [
        { role: 'user', content: 'what is 2+2?' },
        ...out1,
        { type: 'function_call_output', call_id: 'c1', output: 'ok' },
      ],
      store: true,
    });
    expect(full.blocks.map((x) => x.hash)).toEqual(resent.blocks.map((x) => x.hash));
    expect(full.totalTokens).toBe(resent.totalTokens);
    expect(full.body.value().previous_response_id).toBeUndefined();
  });

  it('chains chains: the previous full prefix carries every earlier turn', () => {
    const second = {
      model: 'gpt-5.6',
      instructions: 'be brief',
      tools,
      previous_response_id: 'resp_1',
      input: 'and 3+3?',
    };
    const full2 = chainPrefix(b, parse(first), out1, parse(second));
    const out2 = [reply('msg_2', '6')];
    const third = {
      model: 'gpt-5.6',
      instructions: 'be brief',
      tools,
      previous_response_id: 'resp_2',
      input: 'and 4+4?',
    };
    const full3 = chainPrefix(b, full2, out2, parse(third));
    const resent = parse({
      model: 'gpt-5.6',
      instructions: 'be brief',
      tools,
      input: [
        { role: 'user', content: 'what is 2+2?' },
        ...out1,
        { role: 'user', content: 'and 3+3?' },
        ...out2,
        { role: 'user', content: 'and 4+4?' },
      ],
    });
    expect(full3.blocks.map((x) => x.hash)).toEqual(resent.blocks.map((x) => x.hash));
  });

  it('keeps every other member as sent, and adds input when the chained request sent none', () => {
    const raw = b.parse('{"model":"gpt-5.6","previous_response_id":"r","metadata":{"a":1}}', {
      format: 'openai-responses',
    });
    expect(chainedBody(raw.body, [Buffer.from('{"role":"user","content":"x"}')]).toString()).toBe(
      '{"model":"gpt-5.6","metadata":{"a":1},"input":[{"role":"user","content":"x"}]}',
    );
  });
});
