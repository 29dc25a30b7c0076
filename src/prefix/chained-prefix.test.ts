// A previous_response_id chain's prefix is the prefix of the conversation resent in full.
// Pure: no simulator, no proxy.

import { describe, expect, it } from 'vitest';
import { PrefixBuilder } from './build-prefix.js';
import {
  chainBlocks,
  chainedBody,
  chainPrefix,
  contextBlocks,
  itemBlocks,
  opaqueBlocks,
  opaqueItem,
  outputFragment,
} from './chained-prefix.js';
import { messageEnds } from './message-ends.js';

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

  it('is the resent prefix for a request without instructions too (tools, then messages: as Codex sends)', () => {
    const bare = { model: 'gpt-5.6', tools, input: 'what is 2+2?' };
    const chained = { model: 'gpt-5.6', tools, previous_response_id: 'resp_1', input: 'and 3+3?' };
    const context = [...contextBlocks(parse(bare)), ...itemBlocks(b, [outputFragment(out1)])];
    const full = chainBlocks(parse(chained), context).prefix;
    const resent = parse({
      model: 'gpt-5.6',
      tools,
      input: [{ role: 'user', content: 'what is 2+2?' }, ...out1, { role: 'user', content: 'and 3+3?' }],
    });
    expect(full.levels.messages.foldHash).toBe(resent.levels.messages.foldHash);
    expect(full.blocks.map((x) => x.hash)).toEqual(resent.blocks.map((x) => x.hash));
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

describe('chainBlocks (identities only, as the proxy keeps them)', () => {
  const tools = [{ type: 'function', name: 'f', parameters: { type: 'object' } }];
  const first = {
    model: 'gpt-5.6',
    instructions: 'be brief',
    tools,
    input: [
      { role: 'developer', content: 'house rules' },
      { role: 'user', content: [{ type: 'input_text', text: 'what is 2+2?' }], id: 'u1' },
    ],
  };
  const out1 = [
    { type: 'reasoning', id: 'rs_1', summary: [] },
    reply('msg_1', '4'),
    { type: 'function_call', id: 'fc_1', call_id: 'c1', name: 'f', arguments: '{}' },
  ];
  const view = (p: ReturnType<typeof parse>) =>
    p.blocks.map((x) => [x.hash, x.transcript, x.tokens, x.cumulativeTokens, x.messageIndex, x.role]);

  it('keys, counts and transcribes a chain exactly as the bytes resent (chainPrefix), turn after turn', () => {
    const second = {
      model: 'gpt-5.6',
      instructions: 'be brief',
      tools,
      previous_response_id: 'resp_1',
      input: [{ type: 'function_call_output', call_id: 'c1', output: 'ok' }],
    };
    const ctx1 = [...contextBlocks(parse(first)), ...itemBlocks(b, [outputFragment(out1)])];
    const whole2 = chainBlocks(parse(second), ctx1);
    const bytes2 = chainPrefix(b, parse(first), out1, parse(second));
    expect(view(whole2.prefix)).toEqual(view(bytes2));
    expect(whole2.prefix.totalTokens).toBe(bytes2.totalTokens);
    expect(whole2.prefix.levels.messages.foldHash).toBe(bytes2.levels.messages.foldHash);
    expect(messageEnds(whole2.prefix)).toEqual(messageEnds(bytes2));

    const out2 = [reply('msg_2', 'done')];
    const third = { ...second, previous_response_id: 'resp_2', input: 'thanks; and 3+3?' };
    const whole3 = chainBlocks(parse(third), [...whole2.context, ...itemBlocks(b, [outputFragment(out2)])]);
    const bytes3 = chainPrefix(b, bytes2, out2, parse(third));
    expect(view(whole3.prefix)).toEqual(view(bytes3));
  });

  it("keeps the chained request's own spans, and the context the spans it had where it came from", () => {
    const second = { model: 'gpt-5.6', previous_response_id: 'resp_1', input: 'next' };
    const raw = parse(second);
    const before = parse(first);
    const whole = chainBlocks(raw, contextBlocks(before));
    const last = whole.prefix.blocks[whole.prefix.blocks.length - 1];
    expect(last?.span).toEqual(raw.blocks[raw.blocks.length - 1]?.span);
    const opening = (p: typeof raw) => p.blocks.find((x) => x.level === 'messages');
    expect(opening(whole.prefix)?.span).toEqual(opening(before)?.span);
    expect(whole.prefix.levels.messages.params.previous_response_id).toBeUndefined();
  });

  it('an unknown response is one opaque block: its identity is the response id, its size from usage', () => {
    const a = opaqueBlocks(b, 'resp_x', 'context', 1234);
    const again = opaqueBlocks(b, 'resp_x', 'context', 99);
    const other = opaqueBlocks(b, 'resp_y', 'context', 1234);
    expect(a).toHaveLength(1);
    expect(a[0]?.tokens).toBe(1234);
    expect(a[0]?.contentHash).toBe(again[0]?.contentHash);
    expect(a[0]?.contentHash).not.toBe(other[0]?.contentHash);
    expect(a[0]?.contentHash).not.toBe(opaqueBlocks(b, 'resp_x', 'output', 1234)[0]?.contentHash);
    // The same identity as the item resent in bytes: one identity, from the one parser.
    const viaBytes = b.parse(
      chainedBody(parse({ model: 'm', previous_response_id: 'resp_x', input: 'hi' }).body, [
        opaqueItem('resp_x', 'context'),
      ]),
      { format: 'openai-responses' },
    );
    expect(viaBytes.blocks[0]?.contentHash).toBe(a[0]?.contentHash);
  });
});
