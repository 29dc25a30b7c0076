// The built-in fixes run in one order whatever order --fix names them: pin-reminders reshapes the history
// before tools-freeze places its announcements in it, so a reminder that moves after a tool was announced
// still gives a request the provider accepts.

import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { fixRegistry } from '../../src/fixes/registry.js';
import { createProxy } from '../../src/proxy/create-proxy.js';
import { createSimulator } from '../../src/sim/simulator.js';
import { claudeCodeConversation } from '../fleet/claude-code-traffic.js';

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
    const simUrl = await sim.listen();
    const proxy = createProxy({
      upstream: simUrl,
      capture: 'off',
      // A folder of its own: fix state restored from another run's file would be another conversation's.
      dir: mkdtempSync(join(tmpdir(), 'cacheward-fix-order-')),
      fixes: ['tools-freeze', 'pin-reminders'],
      logger: {},
    });
    await proxy.listen();
    try {
      // Claude Code-shaped: an MCP tool loaded at turn 3, a <system-reminder> moved into its own message at 4.
      const statuses: Array<[number, number]> = [];
      for (const t of claudeCodeConversation(1, 6)) {
        const res = await fetch(`${proxy.url}/v1/messages`, {
          method: 'POST',
          headers: { 'x-api-key': 'k', ...t.headers },
          body: JSON.stringify(t.body),
        });
        statuses.push([t.turn, res.status]);
        await res.text();
      }
      expect(statuses).toEqual([1, 2, 3, 4, 5, 6].map((turn) => [turn, 200]));
    } finally {
      await proxy.close();
      await sim.close();
    }
  });
});
