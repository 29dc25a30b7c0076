import { describe, expect, it } from 'vitest';
import { agentConversation, anthropicTool, appendUserTurn } from '../demo/agent-conversation.js';
import { fixRegistry } from '../fixes/registry.js';
import { PrefixBuilder } from '../prefix/build-prefix.js';
import { MemoryProxyState } from '../state/memory-proxy-state.js';
import { fixRequest } from './fix-request.js';

type Json = Record<string, unknown>;
const format = 'anthropic-messages' as const;
const blocksOf = (p: { blocks: readonly object[] } | undefined) =>
  (p?.blocks ?? []).map((b) => JSON.stringify(b));

/** A growing agent session: a turn appended per request, a tool added then removed on the way. */
function session(): Buffer[] {
  let conv = agentConversation({ turns: 6, seed: 5, fileLines: 200 });
  const bodies = [conv];
  for (let t = 0; t < 10; t++) {
    conv = appendUserTurn(conv, `step ${t}`);
    if (t === 4) conv = { ...conv, tools: [...(conv.tools as Json[]), anthropicTool('Later', 5)] };
    if (t === 7) conv = { ...conv, tools: (conv.tools as Json[]).slice(0, -1) };
    bodies.push(conv);
  }
  return bodies.map((b) => Buffer.from(JSON.stringify(b)));
}

describe('fixRequest on a growing session', () => {
  it('forwards bodies whose prefix is what a cold parse of them gives, without comparing them to the last forwarded body again', async () => {
    const builder = new PrefixBuilder();
    const state = new MemoryProxyState();
    const fixes = fixRegistry().resolve(['tools-freeze', 'pin-reminders']);
    const headers = new Headers({ 'content-type': 'application/json' });
    let previousForwarded: Buffer | undefined;
    let hinted = 0;
    for (const [i, body] of session().entries()) {
      const compared = builder.scanStats.bytesCompared;
      const fixed = await fixRequest(
        { fixes, builder, state, log: () => {} },
        {
          id: `r${i}`,
          original: body,
          format,
          provider: 'anthropic',
          route: '/v1/messages',
          requestHeaders: headers,
          start: 1_800_000_000_000 + i * 1_000,
        },
      );
      expect(fixed.client).toBe(body);
      if (fixed.prepared) await state.commit(fixed.prepared, '/v1/messages', 200, fixed.after);
      // The forwarded prefix is the one a builder that never saw the session gives for the same bytes.
      const cold = new PrefixBuilder().parse(fixed.forwarded, {
        format,
        headers: { 'anthropic-beta': fixed.headerOverride?.['anthropic-beta'] },
      });
      expect(blocksOf(fixed.prefix)).toEqual(blocksOf(cold));
      // Where the forwarded body stops sharing bytes with the last one was not counted by comparing them:
      // only the client's body was compared (with the client body before it). Requests that change the
      // tools (5, 8) or where an announcement first sits in the history (6, 9) are compared as before.
      const countedNow = builder.scanStats.bytesCompared - compared;
      if (previousForwarded && ![5, 6, 8, 9].includes(i)) {
        expect(countedNow).toBeLessThanOrEqual(body.length);
        expect(countedNow).toBeGreaterThan(body.length / 2);
        hinted++;
      }
      previousForwarded = fixed.forwarded;
    }
    expect(hinted).toBe(6);
    await state.close();
  });
});
