// The conversation resolver on Responses chains: a request with previous_response_id continues the request
// whose response that was, made whole from identities (prefix/chained-prefix) or, unseen, by the link alone.

import { describe, expect, it } from 'vitest';
import { type Prefix, PrefixBuilder } from '../prefix/build-prefix.js';
import {
  type ContextBlock,
  chainBlocks,
  contextBlocks,
  itemBlocks,
  opaqueBlocks,
  outputFragment,
} from '../prefix/chained-prefix.js';
import { messageEnds } from '../prefix/message-ends.js';
import { MemoryConversationStore } from './conversation-store.js';
import { commitConversation, type Resolution, resolveConversation } from './resolve-conversation.js';

const b = new PrefixBuilder();
const tools = [{ type: 'function', name: 'f', parameters: { type: 'object' } }];
const reply = (text: string) => [
  { type: 'message', role: 'assistant', content: [{ type: 'output_text', text, annotations: [] }] },
];

/** Sends Responses requests as the proxy does: made whole, resolved, committed, answered with an id. */
function driver(store = new MemoryConversationStore()) {
  const contexts = new Map<string, ContextBlock[]>();
  let n = 0;
  return {
    store,
    contexts,
    send(input: string, previous?: string, opts: { label?: string; forget?: boolean } = {}) {
      const id = `r${++n}`;
      const raw: Prefix = b.parse(
        JSON.stringify({
          model: 'gpt-5.4',
          instructions: 'be brief',
          tools,
          input,
          ...(previous ? { previous_response_id: previous } : {}),
          ...(opts.label ? { prompt_cache_key: opts.label } : {}),
        }),
        { format: 'openai-responses' },
      );
      const known = previous ? contexts.get(previous) : undefined;
      const whole = previous
        ? chainBlocks(raw, known ?? opaqueBlocks(b, previous, 'context', 500))
        : { prefix: raw, context: contextBlocks(raw) };
      const req = {
        id,
        time: n * 1000,
        ends: messageEnds(whole.prefix),
        head: whole.prefix.levels.messages.foldHash,
        ...(opts.label ? { label: opts.label } : {}),
        ...(previous ? { previous } : {}),
      };
      const res: Resolution = resolveConversation(store, req);
      commitConversation(store, req, res);
      const responseId = `resp_${id}`;
      store.addResponse(responseId, id);
      if (!opts.forget)
        contexts.set(responseId, [...whole.context, ...itemBlocks(b, [outputFragment(reply(`a${n}`))])]);
      return { ...res, id, responseId };
    },
  };
}

describe('resolveConversation on previous_response_id chains', () => {
  it('five chained turns are one conversation, each continuing the one before', () => {
    const d = driver();
    const t1 = d.send('turn 1');
    let prev = t1;
    const turns = [t1];
    for (let i = 2; i <= 5; i++) {
      const t = d.send(`turn ${i}`, prev.responseId);
      expect(t).toMatchObject({
        relation: 'continues',
        parent: prev.id,
        conversation: t1.conversation,
        turn: i,
      });
      expect(t.shared?.full).toBe(true);
      expect(t.agreed).toBe(true);
      turns.push(t);
      prev = t;
    }
    expect(new Set(turns.map((t) => t.conversation)).size).toBe(1);
  });

  it('two chains on the same response: one line goes on, the other is a fork of that request', () => {
    const d = driver();
    const t1 = d.send('start');
    const t2 = d.send('main line', t1.responseId);
    const a = d.send('one way', t2.responseId);
    const other = d.send('another way', t2.responseId);
    expect(a).toMatchObject({ relation: 'continues', parent: t2.id });
    // The resolver's rule for a line that comes back: the later one continues, the one that went nowhere
    // becomes a fork of the request both chained on.
    expect(other).toMatchObject({ relation: 'continues', parent: t2.id, conversation: t1.conversation });
    expect(other.reclassified).toEqual([{ request: a.id, relation: 'fork', conversation: `c-${a.id}` }]);
    expect(d.store.request(a.id)).toMatchObject({ relation: 'fork', parent: t2.id });
  });

  it('a response whose context the proxy lost (a restart) still links by its id, sharing nothing it can count', () => {
    const d = driver();
    const t1 = d.send('start', undefined, { forget: true });
    const t2 = d.send('next', t1.responseId);
    expect(t2).toMatchObject({ relation: 'continues', parent: t1.id, conversation: t1.conversation });
    expect(t2.shared?.full).toBe(false);
    // The link survives the state file: a restored store still knows which request got the response.
    const restored = new MemoryConversationStore();
    restored.restore(d.store.snapshot());
    const again = driver(restored).send('after restart', t2.responseId);
    expect(again).toMatchObject({ relation: 'continues', parent: t2.id, conversation: t1.conversation });
  });

  it('without the link a chained request would start a new conversation (the opaque context shares no end)', () => {
    const d = driver();
    const t1 = d.send('start', undefined, { forget: true });
    d.store.addResponse('resp_elsewhere', 'nobody');
    const t2 = d.send('next', 'resp_unknown');
    expect(t1.relation).toBe('new');
    expect(t2.relation).toBe('new');
  });
});
