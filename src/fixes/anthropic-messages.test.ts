// historyShapes on a growing conversation reads only what changed and gives what a fresh read gives.
// Pure: bodies in memory, no proxy.

import { describe, expect, it } from 'vitest';
import { PrefixBuilder } from '../prefix/build-prefix.js';
import { agentConversation, appendUserTurn } from '../sim/agent-conversation.js';
import { historyShapes, sameDefinition } from './anthropic-messages.js';
import { pinReminders } from './pin-reminders.js';

type Json = Record<string, unknown>;
const parse = (builder: PrefixBuilder, body: Json) =>
  builder.parse(Buffer.from(JSON.stringify(body)), { format: 'anthropic-messages' });

describe('historyShapes on a growing conversation', () => {
  it('gives what a fresh read gives, with the same objects for the messages an earlier body had', () => {
    const builder = new PrefixBuilder();
    let conv = agentConversation({ turns: 4, seed: 7 });
    let before = historyShapes(parse(builder, conv));
    for (let t = 0; t < 4; t++) {
      conv = appendUserTurn(conv, `turn ${t}`);
      const shapes = historyShapes(parse(builder, conv));
      // A builder that never saw an earlier body reads every message afresh.
      expect(shapes).toEqual(historyShapes(parse(new PrefixBuilder(), conv)));
      const prev = before as NonNullable<typeof before>;
      // The last message of the body before is not shared (it ends where the new turn starts).
      for (let k = 0; k < prev.length - 1; k++) expect(shapes?.[k]).toBe(prev[k]);
      before = shapes;
    }
  });

  it('reads a message again when its bytes changed at the same place', () => {
    const builder = new PrefixBuilder();
    const conv = agentConversation({ turns: 3, seed: 9 });
    const first = historyShapes(parse(builder, conv));
    const messages = structuredClone(conv.messages) as Array<{ role: string; content: Json[] }>;
    messages[0]?.content.push({ type: 'text', text: '<system-reminder>moved here</system-reminder>' });
    const changed = historyShapes(parse(builder, { ...conv, messages }));
    expect(changed?.[0]).not.toBe(first?.[0]);
    expect(changed?.[0]?.ids.length).toBe((first?.[0]?.ids.length ?? 0) + 1);
    expect(changed).toEqual(historyShapes(parse(new PrefixBuilder(), { ...conv, messages })));
  });

  it('pin-reminders keeps the same state and body with a shared builder as with fresh ones', () => {
    const shared = new PrefixBuilder();
    let conv = agentConversation({ turns: 3, seed: 11 });
    let stateShared = pinReminders.initialState();
    let stateFresh = pinReminders.initialState();
    const ctx = {
      provider: 'anthropic' as const,
      route: '/v1/messages',
      now: 0,
      conversation: 'c',
      relation: 'new' as const,
    };
    let reshaped = 0;
    for (let t = 0; t < 5; t++) {
      let body = conv;
      if (t === 3) {
        // The client re-serializes: a reminder moves into a message of its own.
        const messages = structuredClone(conv.messages) as Array<{ role: string; content: Json[] }>;
        const last = messages[messages.length - 1] as { role: string; content: Json[] };
        messages.splice(messages.length - 1, 0, { role: 'user', content: [last.content.shift() as Json] });
        body = { ...conv, messages };
      }
      const bytes = Buffer.from(JSON.stringify(body));
      const a = pinReminders.apply(
        { body: bytes, prefix: parse(shared, body), headers: {} },
        stateShared,
        ctx,
      );
      const b = pinReminders.apply(
        { body: bytes, prefix: parse(new PrefixBuilder(), body), headers: {} },
        stateFresh,
        ctx,
      );
      expect(a.patches).toEqual(b.patches);
      expect(a.notes).toEqual(b.notes);
      expect(a.state).toEqual(b.state);
      if (a.patches) reshaped++;
      stateShared = a.state;
      stateFresh = b.state;
      conv = appendUserTurn(conv, `turn ${t}`);
    }
    // The re-serialized request was put back in its first-seen shape.
    expect(reshaped).toBe(1);
  });
});

describe('sameDefinition', () => {
  const tool = {
    name: 'Read',
    description: 'Reads a file',
    input_schema: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
  };

  it('sets key order, cache markers and defer_loading aside', () => {
    const reordered = {
      input_schema: { required: ['path'], properties: { path: { type: 'string' } }, type: 'object' },
      description: 'Reads a file',
      name: 'Read',
      cache_control: { type: 'ephemeral' },
    };
    expect(sameDefinition(tool, { ...tool })).toBe(true);
    expect(sameDefinition(tool, reordered)).toBe(true);
    expect(sameDefinition(tool, { ...tool, defer_loading: true })).toBe(true);
  });

  it('tells a changed definition, however small', () => {
    expect(sameDefinition(tool, { ...tool, description: 'Reads a file.' })).toBe(false);
    const schema = { ...tool.input_schema, required: [] };
    expect(sameDefinition(tool, { ...tool, input_schema: schema })).toBe(false);
    // The same members in another order and one value changed: still a change.
    expect(
      sameDefinition(tool, { description: 'Reads a file', name: 'Write', input_schema: tool.input_schema }),
    ).toBe(false);
  });
});
