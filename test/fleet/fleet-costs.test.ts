// A busy fleet costs nothing extra, and its live views add up to its report: 24 Claude Code-shaped
// conversations with fixes on (a quarter turn thinking on, a quarter set tool_choice), through one proxy on memory state, then through three proxies on one Redis
// with default settings and every turn on another proxy than the last, beside a process that keeps a CPU
// busy. The fleet writes no more tokens than the one proxy; the three proxies' live rows and metrics, cause
// by cause, are the merged report's over their captures.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PriceTable } from '../../src/analyze/price-table.js';
import { analyzePaths } from '../../src/report/analyze-paths.js';
import { type RedisServer, startRedis } from '../state/redis-server.js';
import { countCauses, type Proc, runFleet, startCli, stopAll } from './fleet-support.js';

const CONVERSATIONS = 24;
const TURNS = 6;

let redis: RedisServer;
let sim: Proc;

beforeAll(async () => {
  redis = await startRedis();
  sim = await startCli(['sim', '--port', '0']);
}, 30_000);

afterAll(async () => {
  stopAll();
  await redis?.close();
});

/** Misses by cause from Prometheus text, summed over several proxies' metrics. */
function metricMisses(texts: string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const t of texts)
    for (const m of t.matchAll(/^cacheward_misses_total\{provider="[^"]*",cause="([^"]+)"\} (\d+)$/gm))
      out[m[1] as string] = (out[m[1] as string] ?? 0) + Number(m[2]);
  return out;
}

describe('a fleet on a busy machine', () => {
  it('writes no more than one proxy, and its live views add up to its merged report', async () => {
    const traffic = { sim: sim.url, conversations: CONVERSATIONS, turns: TURNS, changes: true };
    const one = await runFleet({ ...traffic, state: 'memory' });
    const fleet = await runFleet({
      ...traffic,
      state: redis.url,
      proxies: 3,
      statePrefix: `costs-${process.pid}:`,
      spinner: true,
    });
    const requests = CONVERSATIONS * TURNS;
    expect(one.stats.requests).toBe(requests);
    expect(fleet.stats.requests).toBe(requests);
    const failedOpen = fleet.states.reduce((n, s) => n + s.failedOpen, 0);
    const outages = fleet.states.reduce((n, s) => n + s.outages, 0);
    // Redis never failed: no request went out unfixed, no outage was counted, and nothing cost more.
    expect(
      fleet.stats.tokensWritten,
      `fleet wrote ${fleet.stats.tokensWritten}, one proxy ${one.stats.tokensWritten}; ${failedOpen} requests went out unfixed`,
    ).toBeLessThanOrEqual(one.stats.tokensWritten);
    expect({ failedOpen, outages }).toEqual({ failedOpen: 0, outages: 0 });

    // The live views: each proxy's rows are the requests it served, each judged on the whole fleet's traffic.
    expect(fleet.rows).toHaveLength(requests);
    const report = await analyzePaths(fleet.dirs, { prices: new PriceTable() });
    expect(report.totals.requests).toBe(requests);
    const reportCauses = countCauses(report.requests.map((r) => r.miss?.cause));
    const liveCauses = countCauses(fleet.rows.map((r) => r.cause));
    expect(reportCauses.cold_start).toBe(CONVERSATIONS);
    expect(Object.keys(reportCauses).length).toBeGreaterThan(1);
    expect(liveCauses).toEqual(reportCauses);
    // Per request too: the same cause and the same relation for every id.
    const byId = new Map(report.requests.map((r) => [r.id, r]));
    for (const row of fleet.rows)
      expect({ id: row.id, cause: row.cause, relation: row.relation }).toEqual({
        id: row.id,
        cause: byId.get(row.id)?.miss?.cause,
        relation: byId.get(row.id)?.relation,
      });
    // The metrics count every cause but a conversation's first request, summed over the proxies.
    const { cold_start: _cold, ...rest } = reportCauses;
    expect(metricMisses(fleet.metrics)).toEqual(rest);
    // Each proxy read the whole fleet's records, and made rows of its own only.
    for (const s of fleet.states) expect(s.feed?.waiting).toBe(0);
    expect(fleet.states.reduce((n, s) => n + (s.feed?.own ?? 0), 0)).toBe(requests);
  }, 180_000);
});
