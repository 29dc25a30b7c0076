// A fix the provider refuses is withdrawn, never a lost request: through every built-in fix, a scripted 400
// (the simulator refuses a body carrying the fix's marker) sends the client's own bytes once, the client gets
// that answer, the next request of the conversation goes unfixed; 401/429/500 and unfixed 400s pass through.

import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PriceTable } from '../../src/analyze/price-table.js';
import { VirtualClock } from '../../src/core/clock.js';
import { createProxy } from '../../src/proxy/create-proxy.js';
import { analyzePaths } from '../../src/report/analyze-paths.js';
import { renderTerminalReport } from '../../src/report/terminal-report.js';
import { createSimulator } from '../../src/sim/simulator.js';
import { type RedisServer, redisInstalled, startRedis } from '../state/redis-server.js';
import {
  anthropic,
  CASES,
  expectRefusalRecords,
  type Json,
  KEY,
  MODEL,
  playCase,
  records,
  replyOf,
  user,
} from './refusal-cases.js';

const same = (t: string) => t;
const plain = { bold: same, dim: same, yellow: same, green: same };

describe('a fix the provider refuses is withdrawn', () => {
  const clock = new VirtualClock();
  const sim = createSimulator({ clock });
  let simUrl: string;
  beforeAll(async () => {
    simUrl = await sim.listen();
  });
  afterAll(() => sim.close());

  it.each(CASES.map((c) => [`${c.fix}${c.route ? ` (${c.route}, ${c.status})` : ''}`, c] as const))(
    '%s: the client gets the unfixed answer, the next request goes unfixed, and it is said everywhere',
    async (_name, c) => {
      const dir = mkdtempSync(join(tmpdir(), 'cacheward-refusal-'));
      const logs: string[] = [];
      const proxy = createProxy({
        upstream: simUrl,
        dir,
        clock,
        capture: 'full',
        fixes: [c.fix],
        logger: { warn: (l) => logs.push(l) },
      });
      await proxy.listen();
      const before = sim.stats().requests;
      try {
        const sent = await playCase(
          c,
          (route, init) => fetch(`${proxy.url}${route}`, init),
          () => clock.advance(5_000),
        );
        await proxy.flush();
        // One resend: the refused request went upstream twice, every other once.
        expect(sim.stats().requests - before).toBe(c.turns.length + 1);
        expect(proxy.health().fixRefusals).toEqual({ [c.fix]: 1 });
        expect(logs.filter((l) => l.includes('refused by the provider'))).toHaveLength(1);
        // What the provider answered is what the capture keeps: the client's own bytes; the requests after
        // it go out as the client sent them (the fix is off for the conversation).
        expectRefusalRecords(c, await records(dir), sent);
        // The live page's state says so.
        const live = await (await fetch(`${proxy.url}/_cacheward/state`)).text();
        expect(live).toContain('fix refused by the provider');
        // The report says so.
        const report = renderTerminalReport(await analyzePaths([dir], { prices: new PriceTable() }), plain);
        expect(report.join('\n')).toContain(`fix refused by the provider: ${c.fix} 1×`);
      } finally {
        await proxy.close();
      }
    },
  );

  it('passes 401, 429, 500 and the 400 of an unchanged request through untouched, sent once', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cacheward-refusal-pass-'));
    const proxy = createProxy({
      upstream: simUrl,
      dir,
      clock,
      capture: 'full',
      fixes: ['tools-freeze', 'ttl'],
      logger: {},
    });
    await proxy.listen();
    try {
      const fixed = JSON.stringify(anthropic([user('hello')]));
      const send = async (body: string, headers: Record<string, string>) => {
        const before = sim.stats().requests;
        const res = await fetch(`${proxy.url}/v1/messages`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...headers },
          body,
        });
        const text = await res.text();
        return { status: res.status, text, upstream: sim.stats().requests - before };
      };
      for (const [fault, status] of [
        ['429', 429],
        ['500', 500],
        ['529', 529],
      ] as const) {
        const r = await send(fixed, { 'x-api-key': KEY, 'x-sim-fault': fault });
        expect(r.status).toBe(status);
        expect(r.upstream).toBe(1);
      }
      const unauthorized = await send(fixed, {});
      expect(unauthorized.status).toBe(401);
      expect(unauthorized.upstream).toBe(1);
      // No fix changes this request (no tools, no marker): its own 400 is the client's answer, sent once.
      const invalid = JSON.stringify({ model: MODEL, messages: [user('no max_tokens')] });
      const r = await send(invalid, { 'x-api-key': KEY });
      expect(r.status).toBe(400);
      expect(JSON.parse(r.text).error.type).toBe('invalid_request_error');
      expect(r.upstream).toBe(1);
      expect(proxy.health().fixRefusals).toEqual({ 'tools-freeze': 0, ttl: 0 });
    } finally {
      await proxy.close();
    }
  });
});

describe.skipIf(!redisInstalled())('a fleet honours a withdrawal', () => {
  let redis: RedisServer;
  beforeAll(async () => {
    redis = await startRedis();
  }, 20_000);
  afterAll(() => redis?.stop());

  it('refused on one proxy, the conversation goes unfixed on another (the withdrawal is in the shared state)', async () => {
    const clock = new VirtualClock();
    const sim = createSimulator({ clock });
    const simUrl = await sim.listen();
    const dir = mkdtempSync(join(tmpdir(), 'cacheward-refusal-fleet-'));
    const open = () =>
      createProxy({
        upstream: simUrl,
        dir,
        clock,
        capture: 'off',
        fixes: ['tools-freeze'],
        state: redis.url,
        statePrefix: 'refusal-test',
        logger: {},
      });
    const [a, b] = [open(), open()];
    await a.listen();
    await b.listen();
    try {
      const headers = {
        'content-type': 'application/json',
        'x-api-key': KEY,
        'x-sim-refuse-if': 'cacheward_deferred_placeholder',
      };
      const first = anthropic([user('first')]);
      const r1 = await fetch(`${a.url}/v1/messages`, {
        method: 'POST',
        headers,
        body: JSON.stringify(first),
      });
      const j1 = (await r1.json()) as Json;
      expect(r1.status).toBe(200);
      clock.advance(5_000);
      const before = sim.stats().requests;
      const second = anthropic([...(first.messages as Json[]), replyOf('/v1/messages', j1), user('second')]);
      const r2 = await fetch(`${b.url}/v1/messages`, {
        method: 'POST',
        headers,
        body: JSON.stringify(second),
      });
      expect(r2.status).toBe(200);
      await r2.text();
      // Proxy b sent it once, unfixed (the simulator would have refused the placeholder).
      expect(sim.stats().requests - before).toBe(1);
      expect(a.health().fixRefusals).toEqual({ 'tools-freeze': 1 });
      expect(b.health().fixRefusals).toEqual({ 'tools-freeze': 0 });
    } finally {
      await a.close();
      await b.close();
      await sim.close();
    }
  });
});
