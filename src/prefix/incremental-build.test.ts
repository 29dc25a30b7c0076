// A prefix built by extending a kept body equals the one built from scratch, whatever changed.
// Pure: bodies in memory.

import { describe, expect, it } from 'vitest';
import { prefixData } from '../../test/fixtures/prefix-data.js';
import { agentConversation, anthropicTool, appendUserTurn, seededRandom } from '../sim/agent-conversation.js';
import type { WireFormat } from '../wire/request-body.js';
import { type Prefix, PrefixBuilder } from './build-prefix.js';
import { messageEnds } from './message-ends.js';

type Json = Record<string, unknown>;

/**
 * Parses `bodies` in order with one builder (each extends what it kept) and checks every prefix against a
 * fresh builder's; returns the warm builder's prefixes.
 */
function checkAgainstFull(
  bodies: Array<Buffer | string>,
  format: WireFormat = 'anthropic-messages',
): Prefix[] {
  const warm = new PrefixBuilder();
  return bodies.map((b, i) => {
    const bytes = typeof b === 'string' ? Buffer.from(b) : b;
    const incremental = warm.parse(bytes, { format });
    const full = new PrefixBuilder().parse(bytes, { format });
    expect(prefixData(incremental), `body ${i}`).toEqual(prefixData(full));
    // Message ends extended from the kept body's (its blocks taken over) equal ends read from scratch.
    expect(messageEnds(incremental), `ends of body ${i}`).toEqual(messageEnds(full));
    return incremental;
  });
}

const text = (v: Json) => JSON.stringify(v);

/** A session of requests that each append one exchange, as an agent sends them. */
function session(seed: number, turns: number): Json[] {
  let conv = agentConversation({ turns: 3, seed });
  const out = [conv];
  for (let t = 0; t < turns; t++) {
    conv = appendUserTurn(conv, `next step ${t} of ${seed}`);
    out.push(conv);
  }
  return out;
}

describe('a prefix built by extending a kept body equals the one built from scratch', () => {
  it('for a growing agent session, and it took the shared part over (the same block objects)', () => {
    const bodies = session(1, 6).map(text);
    const prefixes = checkAgainstFull(bodies);
    const [a, b] = prefixes.slice(-2) as [Prefix, Prefix];
    const m = b.levels.messages.start;
    expect(b.blocks[m]).toBe(a.blocks[m]);
    expect(b.blocks[b.blocks.length - 1]).not.toBe(a.blocks[a.blocks.length - 1]);
  });

  it('when a message in the middle of the history changes', () => {
    const [base] = session(2, 0) as [Json];
    const messages = base.messages as Json[];
    const edited = structuredClone(messages);
    (edited[2] as Json).content = [{ type: 'text', text: 'an edited old message' }];
    // The last message gains a block (a reminder appended to it): its end moves on.
    const grown = structuredClone(messages);
    const last = grown[grown.length - 1] as { content: unknown };
    const blocks =
      typeof last.content === 'string' ? [{ type: 'text', text: last.content }] : (last.content as Json[]);
    last.content = [...blocks, { type: 'text', text: '<system-reminder>more</system-reminder>' }];
    checkAgainstFull([
      text(base),
      text({ ...base, messages: edited }),
      text(base),
      text({ ...base, messages: grown }),
    ]);
  });

  it('when the shared bytes end inside a string, an escape or a multibyte character', () => {
    const head = { model: 'claude-opus-5', max_tokens: 8, system: 'Be brief.' };
    const msg = (t: string) => ({ role: 'user', content: [{ type: 'text', text: t }] });
    const bodies = [
      // Inside a plain string, then inside an escape sequence (\n vs \t, \u00e9 vs \u00e8).
      text({ ...head, messages: [msg('shared words then A'), msg('x')] }),
      text({ ...head, messages: [msg('shared words then B'), msg('x')] }),
      text({ ...head, messages: [msg('line\nbreak'), msg('x')] }),
      text({ ...head, messages: [msg('line\tbreak'), msg('x')] }),
      `{"model":"claude-opus-5","max_tokens":8,"messages":[{"role":"user","content":"caf\\u00e9"},{"role":"assistant","content":"ok"}]}`,
      `{"model":"claude-opus-5","max_tokens":8,"messages":[{"role":"user","content":"caf\\u00e8"},{"role":"assistant","content":"ok"}]}`,
      // Inside a multibyte UTF-8 character: é (c3 a9) against è (c3 a8), and a 4-byte emoji against another.
      text({ ...head, messages: [msg('café au lait'), msg('y')] }),
      text({ ...head, messages: [msg('cafè au lait'), msg('y')] }),
      text({ ...head, messages: [msg('fire 🔥 here'), msg('y')] }),
      text({ ...head, messages: [msg('fire 🔦 here'), msg('y')] }),
    ];
    checkAgainstFull(bodies);
  });

  it('when the keys are reordered and the tools come after the messages (their offsets move)', () => {
    const turns = session(3, 4);
    const messagesFirst = turns.map(({ messages, tools, system, ...rest }) =>
      text({ messages, ...rest, system, tools }),
    );
    const prefixes = checkAgainstFull([...messagesFirst, ...turns.map(text), ...messagesFirst.slice(-2)]);
    // With the tools after the messages the messages' blocks are still taken over from the body before.
    const [a, b] = [prefixes[3], prefixes[4]] as [Prefix, Prefix];
    const m = b.levels.messages.start;
    expect(b.blocks[m]).toBe(a.blocks[m]);
  });

  it("when Claude Code's billing line changes on every request, before or after the messages", () => {
    const billing = (n: number) => ({
      type: 'text',
      text: `x-anthropic-billing-header: cc_version=2.1.37.a1b; cc_entrypoint=cli; cch=${String(n).padStart(5, '0')};`,
    });
    const turns = session(5, 4).map(
      (t, n): Json => ({ ...t, system: [billing(n), ...(t.system as Json[])] }),
    );
    // As Claude Code sends it (model, messages, system, tools) and with the system prompt first.
    const claudeCode = turns.map(({ model, messages, ...rest }) => text({ model, messages, ...rest }));
    for (const bodies of [claudeCode, turns.map(text)]) {
      const prefixes = checkAgainstFull(bodies);
      // The new `cch=` changes no block: the messages' blocks are the body before's very objects.
      const [a, b] = prefixes.slice(-2) as [Prefix, Prefix];
      const m = b.levels.messages.start;
      expect(b.billingHeader).toBeDefined();
      expect(b.blocks[m]).toBe(a.blocks[m]);
      expect(b.blocks[a.blocks.length - 2]).toBe(a.blocks[a.blocks.length - 2]);
    }
  });

  it("takes a Claude Code body's history over in one run after its forwarded twin (a tool more) was parsed", () => {
    // As the fix path parses them: the client's body, then the body it forwards (tools-freeze's placeholder
    // appended to tools, so every unit after the tools sits one further on), then the client's next body.
    const billing = (n: number) => ({
      type: 'text',
      text: `x-anthropic-billing-header: cc_version=2.1.37.a1b; cc_entrypoint=cli; cch=${String(n).padStart(5, '0')};`,
    });
    let conv = agentConversation({ turns: 40, seed: 11 });
    const placeholder = { ...anthropicTool('Placeholder', 2), defer_loading: true };
    const warm = new PrefixBuilder();
    for (let n = 0; n < 6; n++) {
      conv = appendUserTurn(conv, `step ${n}`);
      const { model, messages, ...rest } = conv;
      const client = text({ model, messages, ...rest, system: [billing(n), ...(conv.system as Json[])] });
      const forwarded = text({
        model,
        messages,
        ...rest,
        system: [billing(n), ...(conv.system as Json[])],
        tools: [...(conv.tools as Json[]), placeholder],
      });
      for (const body of [client, forwarded]) {
        const before = warm.units.stats.compared;
        const got = warm.parse(Buffer.from(body));
        expect(prefixData(got)).toEqual(prefixData(new PrefixBuilder().parse(Buffer.from(body))));
        const compared = warm.units.stats.compared - before;
        // Beyond the run taken over: the tools and system (their bytes moved), the new turn, a few more.
        const outsideMessages = got.body.units.filter((u) => u.level !== 'messages').length;
        if (n > 0) expect(compared).toBeLessThanOrEqual(outsideMessages + 4);
      }
    }
  });

  it('for a body shorter than its base, a resent one, and one that drops the last message', () => {
    const turns = session(4, 3).map(text);
    const full = turns[3] as string;
    checkAgainstFull([full, turns[1] as string, full, full, turns[2] as string, full]);
  });

  it('for bodies that are not compact JSON (whitespace between items keeps them unclean)', () => {
    const turns = session(5, 3);
    const pretty = turns.map((t) => JSON.stringify(t, null, 1));
    // Compact items inside a spaced array: the array is unclean while each item is clean.
    const spaced = turns.map(
      ({ messages, ...rest }) =>
        `${text(rest).slice(0, -1)},"messages":[${(messages as Json[]).map(text).join(', ')}]}`,
    );
    // A spaced separator only after the shared part: clean up to it, unclean after.
    const late = turns.map(({ messages, ...rest }) => {
      const list = (messages as Json[]).map(text);
      return `${text(rest).slice(0, -1)},"messages":[${list.slice(0, -1).join(',')}, ${list[list.length - 1]}]}`;
    });
    // A spaced separator early in the shared part, compact after it: the shared part makes it unclean.
    const early = turns.map(({ messages, ...rest }) => {
      const list = (messages as Json[]).map(text);
      return `${text(rest).slice(0, -1)},"messages":[${list[0]}, ${list.slice(1).join(',')}]}`;
    });
    const earlyPrefixes = checkAgainstFull(early);
    expect(earlyPrefixes.map((p) => p.body.root.members.get('messages')?.clean)).toEqual(
      early.map(() => false),
    );
    checkAgainstFull(pretty);
    checkAgainstFull(spaced);
    checkAgainstFull([...late, ...turns.map(text)]);
    const prefixes = checkAgainstFull(spaced);
    expect(prefixes.every((p) => !p.body.root.clean)).toBe(true);
  });

  it('with images, citations and deferred tools inside the shared part (the derived flags)', () => {
    const img = {
      role: 'user',
      content: [
        { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' } },
        { type: 'text', text: 'what is this?' },
      ],
    };
    const deferred = { ...anthropicTool('Search', 3), defer_loading: true };
    let conv: Json = { ...agentConversation({ turns: 2, seed: 6 }) };
    conv = { ...conv, tools: [...(conv.tools as Json[]), deferred] };
    conv = {
      ...conv,
      messages: [img, { role: 'assistant', content: 'a picture' }, ...(conv.messages as Json[])],
    };
    const bodies = [conv];
    for (let t = 0; t < 3; t++) bodies.push(appendUserTurn(bodies[bodies.length - 1] as Json, `q${t}`));
    const prefixes = checkAgainstFull(bodies.map(text));
    expect(prefixes[3]?.levels.messages.params.images).toBe(true);
    expect(prefixes[3]?.deferredTools).toEqual(['Search']);
  });

  it('for random interleaved sessions in other formats', () => {
    const rand = seededRandom(7);
    const chat = (n: number) => ({
      model: 'gpt-5',
      messages: [
        { role: 'system', content: 'Be brief.' },
        ...Array.from({ length: n }, (_, i) => ({
          role: i % 2 ? 'assistant' : 'user',
          content: `turn ${i} ${'w'.repeat(Math.floor(rand() * 40))}`,
        })),
      ],
    });
    const bodies: string[] = [];
    for (let n = 1; n < 12; n++) bodies.push(text(chat(n)), text(chat(n + 1)));
    checkAgainstFull(bodies, 'openai-chat');
    const responses = (n: number) => ({
      model: 'gpt-5',
      instructions: 'Be brief.',
      input: Array.from({ length: n }, (_, i) =>
        i % 3 === 2
          ? { type: 'function_call_output', call_id: `c${i}`, output: `out ${i}` }
          : { role: i % 2 ? 'assistant' : 'user', content: [{ type: 'input_text', text: `t${i}` }] },
      ),
    });
    checkAgainstFull(
      Array.from({ length: 10 }, (_, n) => text(responses(n + 1))),
      'openai-responses',
    );
  });
});
