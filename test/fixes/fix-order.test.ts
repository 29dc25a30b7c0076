// The built-in fixes run in one order whatever order --fix names them: pin-reminders reshapes the history
// before tools-freeze places its announcements in it, so a reminder that moves after a tool was announced
// still gives a request the provider accepts.

import { describe, expect, it } from 'vitest';
import { agentConversation, anthropicTool, appendUserTurn } from '../../src/demo/agent-conversation.js';
import { fixRegistry } from '../../src/fixes/registry.js';
import { createProxy } from '../../src/proxy/create-proxy.js';
import { createSimulator } from '../../src/sim/simulator.js';

type Json = Record<string, unknown>;
const REMINDER = { type: 'text', text: '<system-reminder>\nThe user opened src/app.ts.\n</system-reminder>' };

describe('fix order', () => {
  it('runs the built-in fixes in the registry order, whatever order they are named in', () => {
    const names = (n: string[]) =>
      fixRegistry()
        .resolve(n)
        .map((f) => f.name);
    expect(names(['tools-freeze', 'pin-reminders'])).toEqual(['pin-reminders', 'tools-freeze']);
    expect(names(['ttl', 'tools-freeze', 'tools-sort'])).toEqual(['tools-sort', 'tools-freeze', 'ttl']);
  });

  it('keeps a request valid when a reminder moves after a tool was announced (--fix tools-freeze,pin-reminders)', async () => {
    const sim = createSimulator();
    const simUrl = await sim.listen(0);
    const proxy = await createProxy({
      upstream: simUrl,
      capture: 'off',
      fixes: ['tools-freeze', 'pin-reminders'],
      log: () => {},
    });
    try {
      let conv = agentConversation({ turns: 3, seed: 81 });
      const statuses: number[] = [];
      for (let t = 0; t < 4; t++) {
        let body: Json = structuredClone(conv);
        if (t >= 1) body.tools = [...(body.tools as Json[]), anthropicTool('mcp__late')];
        if (t >= 2) {
          // The client re-serializes: the reminder now rides in its own user message before the last one.
          const msgs = body.messages as Json[];
          body = {
            ...body,
            messages: [...msgs.slice(0, -1), { role: 'user', content: [{ ...REMINDER }] }, msgs.at(-1)],
          };
        }
        const res = await fetch(`${proxy.url}/v1/messages`, {
          method: 'POST',
          headers: { 'x-api-key': 'k', 'x-cacheward-session': 'order' },
          body: JSON.stringify(body),
        });
        statuses.push(res.status);
        await res.text();
        conv = appendUserTurn(conv, `turn ${t}`);
      }
      expect(statuses).toEqual([200, 200, 200, 200]);
    } finally {
      await proxy.close();
      await sim.close();
    }
  });
});
