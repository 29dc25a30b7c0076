import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { VirtualClock } from '../../src/core/clock.js';
import { fixRegistry } from '../../src/fixes/registry.js';
import { createProxy } from '../../src/proxy/create-proxy.js';
import { replayCaptures } from '../../src/replay/replay-captures.js';
import { agentConversation, appendUserTurn } from '../../src/sim/agent-conversation.js';
import { createSimulator } from '../../src/sim/simulator.js';
import { cli } from '../cli/run-cli.js';

type Json = Record<string, unknown>;

/** One session through the proxy: a turn, a count_tokens call, a request the upstream refuses, a turn, one without a key. */
let dir: string;
const statuses: number[] = [];

beforeAll(async () => {
  const clock = new VirtualClock();
  const sim = createSimulator({ clock });
  const simUrl = await sim.listen();
  dir = mkdtempSync(join(tmpdir(), 'cacheward-notturns-'));
  const proxy = createProxy({ upstream: simUrl, dir, clock, capture: 'full', logger: {} });
  await proxy.listen();
  const first = agentConversation({ turns: 3, seed: 5 });
  const { max_tokens: _, ...counted } = first;
  const noMaxTokens = appendUserTurn(first, 'and then?');
  delete noMaxTokens.max_tokens;
  const sends: Array<[string, Json, Record<string, string>]> = [
    ['/v1/messages', first, {}],
    ['/v1/messages/count_tokens', counted, {}],
    ['/v1/messages', noMaxTokens, {}],
    ['/v1/messages', appendUserTurn(first, 'next'), {}],
    ['/v1/messages', appendUserTurn(appendUserTurn(first, 'next'), 'more'), { 'x-api-key': '' }],
  ];
  try {
    for (const [route, body, headers] of sends) {
      clock.advance(5_000);
      const res = await fetch(`${proxy.url}${route}`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'x-api-key': 'k',
          'x-cacheward-session': 'nt',
          ...headers,
        },
        body: JSON.stringify(body),
      });
      await res.text();
      statuses.push(res.status);
    }
    await proxy.flush();
  } finally {
    await proxy.close();
    await sim.close();
  }
}, 30_000);

describe('the replay gate and requests that are turns of no conversation', () => {
  it('captured what it meant to: a turn, count_tokens, a 400, a turn, a 401', () => {
    expect(statuses).toEqual([200, 200, 400, 200, 401]);
  });

  it('counts neither count_tokens calls nor the client’s own 4xx mistakes as violations', async () => {
    const fixes = fixRegistry('1h').resolve(['tools-freeze', 'pin-reminders', 'tools-sort']);
    const r = await replayCaptures([dir], { fixes });
    expect(r.violations).toEqual([]);
    // The two answered turns are replayed; the count_tokens call and the two refused requests are not turns.
    expect(r.requests).toBe(2);
    expect(r.skipped).toBe(3);
    const gate = await cli(['replay', dir, '--fix', 'tools-freeze,pin-reminders', '--gate']);
    expect(gate.code, gate.stdout).toBe(0);
    expect(gate.stdout).toContain('3 records skipped');
  });
});
