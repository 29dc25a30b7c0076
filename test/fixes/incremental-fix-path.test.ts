// The fix path on a warm prefix builder (each body extends a kept one, its shared part taken over in bulk)
// forwards exactly the bytes, notes and states a cold builder gives (every body built from scratch).

import { describe, expect, it } from 'vitest';
import { runFixStage } from '../../src/fixes/fix-stage.js';
import { fixRegistry } from '../../src/fixes/registry.js';
import { PrefixBuilder } from '../../src/prefix/build-prefix.js';
import { agentConversation, anthropicTool, appendUserTurn } from '../../src/sim/agent-conversation.js';

type Json = Record<string, unknown>;
const format = 'anthropic-messages' as const;
const ctx = {
  provider: 'anthropic' as const,
  route: '/v1/messages',
  now: 0,
  conversation: 'c',
  relation: 'continues' as const,
};

/** Runs a session's requests through the fix stage, each on the state the one before left. */
function run(bodies: Json[], builder: () => PrefixBuilder) {
  const fixes = fixRegistry().resolve(['tools-freeze', 'pin-reminders']);
  let states: ReadonlyMap<string, unknown> | undefined;
  return bodies.map((b) => {
    const body = Buffer.from(JSON.stringify(b));
    const parser = builder();
    const out = runFixStage({
      fixes,
      body,
      prefix: parser.parse(body, { format }),
      headers: {},
      states,
      context: ctx,
      reparse: (next, h) => builder().parse(next, { format, headers: h }),
    });
    states = out.states;
    return {
      body: out.body.toString(),
      notes: out.notes,
      states: JSON.stringify([...out.states]),
      blocks: out.prefix.blocks.map((x) => [x.hash, x.cumulativeTokens, x.span.start, x.span.end]),
    };
  });
}

describe('the fix path with a warm prefix builder', () => {
  it('forwards what a cold one forwards, request by request, across tool changes and reshaped reminders', () => {
    let conv = agentConversation({ turns: 4, seed: 11 });
    const bodies: Json[] = [conv];
    for (let t = 0; t < 8; t++) {
      conv = appendUserTurn(conv, `step ${t}`);
      // A tool added, then removed (announced), and a reminder re-serialized into its own message.
      if (t === 3) conv = { ...conv, tools: [...(conv.tools as Json[]), anthropicTool('Later', 5)] };
      if (t === 5) conv = { ...conv, tools: (conv.tools as Json[]).slice(1) };
      if (t === 6) {
        const messages = structuredClone(conv.messages as Json[]);
        const last = messages[messages.length - 1] as { content: Json[] };
        messages.splice(messages.length - 1, 0, {
          role: 'user',
          content: [{ type: 'text', text: '<system-reminder>remember</system-reminder>' }],
        });
        last.content = [...last.content];
        conv = { ...conv, messages };
      }
      bodies.push(conv);
    }
    // The same session with its tools sent after its messages (their offsets move on every request).
    const reordered = bodies.map(({ messages, tools, ...rest }) => ({ messages, ...rest, tools }));
    // As Claude Code sends it: model, messages, then a system prompt led by a billing line with a new `cch=`
    // on every request, then the tools; and the same with a tool's definition changed half way (re-frozen).
    const billing = (n: number) => ({
      type: 'text',
      text: `x-anthropic-billing-header: cc_version=2.1.37.a1b; cc_entrypoint=cli; cch=${String(n).padStart(5, '0')};`,
    });
    const claudeCode = bodies.map(({ model, messages, system, tools, ...rest }, n) => ({
      model,
      messages,
      ...rest,
      system: [billing(n), ...(system as Json[])],
      tools,
    }));
    const redefined = claudeCode.map((b, n) =>
      n < 5
        ? b
        : {
            ...b,
            tools: (b.tools as Json[]).map((t, k) => (k === 0 ? { ...t, description: 'changed' } : t)),
          },
    );
    for (const session of [bodies, reordered, claudeCode, redefined]) {
      const warm = new PrefixBuilder();
      const warmRun = run(session, () => warm);
      const coldRun = run(session, () => new PrefixBuilder());
      expect(warmRun).toEqual(coldRun);
      // The fixes did something: tools frozen with the placeholder, announcements inserted.
      expect(warmRun.some((r) => r.body.includes('cacheward_deferred_placeholder'))).toBe(true);
      expect(warmRun.some((r) => r.body.includes('tool_addition'))).toBe(true);
      if (session === redefined)
        expect(warmRun.some((r) => JSON.stringify(r.notes).includes('re-froze'))).toBe(true);
    }
  });
});
