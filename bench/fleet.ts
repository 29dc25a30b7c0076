// Benchmark: what a fleet costs. First in tokens, on a busy machine: 24 Claude Code-shaped conversations
// with fixes on through one proxy on memory state, then through three proxies on one Redis (default
// settings, every turn on another proxy than the last) beside a process that keeps a CPU busy, then the
// same with Redis frozen (SIGSTOP) for 3 s mid-run: the simulator's written tokens side by side, the
// requests that went out unfixed and what health and the merged report say they cost. Floor: the busy
// fleet writes no more than the one proxy. Then in time: what `--state redis://…` adds to a request
// against memory state, at 50 KB: four `cacheward proxy --fix …` processes on loopback, one on memory, one
// on Redis that serves its conversations alone (sticky), two on Redis that take a conversation's turns in
// turn (round-robin: every turn is read from Redis); growing Claude Code-like conversations of ~50 KB,
// streamed, one request at a time, interleaved. Floor: at most +0.5 ms p50 (sticky).
// Run: npm run bench:fleet (builds first; under two minutes)

import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Pool } from 'undici';
import { PriceTable } from '../src/analyze/price-table.js';
import { analyzePaths } from '../src/report/analyze-paths.js';
import { appendUserTurn } from '../src/sim/agent-conversation.js';
import { type FleetRun, runFleet } from '../test/fleet/fleet-support.js';
import { type RedisServer, startRedis } from '../test/state/redis-server.js';
import { bodyOfSize, type Json, machineLine, percentile, startCli } from './support.js';

const FIXES = 'pin-reminders,tools-freeze';
const TURNS_PER_CONVERSATION = 20;
/** Requests each series sends before the timed phase. */
const WARM_UP = 20;

async function timed(pool: Pool, body: string, session: string): Promise<{ ttfb: number; total: number }> {
  const t0 = performance.now();
  const res = await pool.request({
    path: '/v1/messages',
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': 'bench-key', 'x-cacheward-session': session },
    body,
  });
  const ttfb = performance.now() - t0;
  await res.body.arrayBuffer();
  if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}`);
  return { ttfb, total: performance.now() - t0 };
}

/** Conversation `n` of a side: ~50 KB to start, one short turn more per request. */
function* conversations(seed: number): Generator<{ body: string; session: string }> {
  for (let n = 0; ; n++) {
    let conv: Json = bodyOfSize(50 * 1024, seed + n);
    for (let t = 0; t < TURNS_PER_CONVERSATION; t++) {
      yield { body: JSON.stringify({ ...conv, stream: true }), session: `bench-${seed}-${n}` };
      conv = appendUserTurn(conv, `turn ${t}: carry on`);
    }
  }
}

type Sample = { ttfb: number; total: number };
type Traffic = Generator<{ body: string; session: string }>;

async function stopped(c: ChildProcess): Promise<void> {
  if (c.exitCode !== null || c.signalCode !== null) return;
  const exited = new Promise<void>((r) => c.once('exit', () => r()));
  c.kill('SIGTERM');
  await exited;
}

const CONVERSATIONS = 24;
const TURNS = 8;

/** The token figures: one proxy, the busy fleet, the busy fleet with Redis frozen 3 s; one table. */
async function tokens(sim: string, redis: RedisServer): Promise<void> {
  const traffic = { sim, conversations: CONVERSATIONS, turns: TURNS };
  const load = () => loadavg()[0]?.toFixed(1);
  const rows: Array<{ name: string; run: FleetRun; load: string | undefined; report?: string }> = [];
  const one = await runFleet({ ...traffic, state: 'memory' });
  rows.push({ name: 'one proxy, memory state', run: one, load: load() });
  const busy = await runFleet({
    ...traffic,
    state: redis.url,
    statePrefix: `bench-busy-${process.pid}:`,
    spinner: true,
  });
  rows.push({ name: 'three proxies on Redis, a CPU spinner beside them', run: busy, load: load() });
  let paused: Promise<void> | undefined;
  const frozen = await runFleet({
    ...traffic,
    state: redis.url,
    statePrefix: `bench-frozen-${process.pid}:`,
    spinner: true,
    // Frozen as round 4 goes out: its requests wait for Redis, later ones find it out.
    onRound: (round) => {
      if (round === 4) paused = redis.pause(3_000);
    },
  });
  await paused;
  const report = await analyzePaths(frozen.dirs, { prices: new PriceTable() });
  const u = report.totals.unfixed;
  rows.push({
    name: 'the same, Redis frozen (SIGSTOP) 3 s at round 4',
    run: frozen,
    load: load(),
    report: u
      ? `${u.requests} unfixed, ${u.rewrittenTokens.toLocaleString('en-US')} re-written`
      : 'none unfixed',
  });
  console.log(
    `\n${CONVERSATIONS} Claude Code-shaped conversations × ${TURNS} turns, --fix ${FIXES}, streamed; turn r of every conversation at once (shared machine: load is the 1-minute average after each run):`,
  );
  console.log(
    'run | written tokens | read tokens | vs one proxy | unfixed (health) | outages | unfixed cost, live (re-written) | merged report | seconds | load',
  );
  console.log('--- | --- | --- | --- | --- | --- | --- | --- | --- | ---');
  for (const r of rows) {
    const sum = (f: (s: FleetRun['states'][number]) => number) => r.run.states.reduce((n, s) => n + f(s), 0);
    const written = r.run.stats.tokensWritten;
    const extra = written - one.stats.tokensWritten;
    console.log(
      `${r.name} | ${written.toLocaleString('en-US')} | ${r.run.stats.tokensRead.toLocaleString('en-US')} | ${extra === 0 ? 'same' : `${extra > 0 ? '+' : ''}${extra.toLocaleString('en-US')} (${(written / one.stats.tokensWritten).toFixed(2)}×)`} | ${sum((s) => s.failedOpen)} | ${sum((s) => s.outages)} | ${sum((s) => s.unfixedCost?.rewrittenTokens ?? 0).toLocaleString('en-US')} | ${r.report ?? '-'} | ${(r.run.elapsedMs / 1000).toFixed(1)} | ${r.load}`,
    );
  }
  const met = busy.stats.tokensWritten <= one.stats.tokensWritten;
  console.log(
    `\nfloor (the busy fleet writes no more than one proxy): ${met ? 'met' : 'NOT met'}; every proxy's live rows: ${busy.rows.length} of ${CONVERSATIONS * TURNS}`,
  );
}

async function main() {
  console.log(machineLine('fleet'));
  // Redis as `redis-server --appendonly yes` runs it (README "Running a fleet"): the file fsynced every second.
  const redis = await startRedis({ appendfsync: 'everysec' });
  const sim = await startCli(['sim', '--port', '0']);
  try {
    await tokens(sim.url, redis);
  } catch (err) {
    sim.child.kill('SIGTERM');
    await redis.close();
    throw err;
  }
  const common = ['proxy', '--port', '0', '--upstream', sim.url, '--capture', 'hashes', '--fix', FIXES];
  const dir = mkdtempSync(join(tmpdir(), 'cacheward-bench-fleet-'));
  const onRedis = (name: string) => [
    ...common,
    '--dir',
    join(dir, name),
    '--state',
    redis.url,
    '--state-prefix',
    `bench-${process.pid}:`,
  ];
  const memory = await startCli([...common, '--dir', join(dir, 'memory')]);
  const sticky = await startCli(onRedis('sticky'));
  const rrA = await startCli(onRedis('rr-a'));
  const rrB = await startCli(onRedis('rr-b'));
  const procs = [memory, sticky, rrA, rrB];
  try {
    const pools = procs.map((p) => new Pool(p.url, { connections: 1 }));
    const [m, r, a, b] = pools as [Pool, Pool, Pool, Pool];
    const series: Array<{ name: string; send: () => Promise<Sample>; xs: Sample[] }> = [];
    const add = (name: string, traffic: Traffic, pick: (n: number) => Pool) => {
      let n = 0;
      series.push({
        name,
        xs: [],
        send: () => {
          const x = traffic.next().value as { body: string; session: string };
          return timed(pick(n++), x.body, x.session);
        },
      });
    };
    add('memory', conversations(1), () => m);
    add('redis', conversations(5001), () => r);
    add('redis, round-robin', conversations(9001), (n) => (n % 2 ? b : a));
    for (let i = 0; i < WARM_UP; i++) for (const s of series) await s.send();
    const until = performance.now() + 12_000;
    // Rotate which goes first, so none always follows another's garbage.
    for (let round = 0; performance.now() < until; round++)
      for (let k = 0; k < series.length; k++) {
        const s = series[(round + k) % series.length] as (typeof series)[number];
        s.xs.push(await s.send());
      }
    const q = (xs: Sample[], k: 'ttfb' | 'total', p: number) =>
      percentile(
        xs.map((x) => x[k]),
        p,
      );
    const states = await Promise.all(
      procs.slice(1).map(
        async (p) =>
          (
            (await (await fetch(`${p.url}/_cacheward/health`)).json()) as {
              state: { failedOpen: number; readCache?: { cached: number } };
            }
          ).state,
      ),
    );
    const mem = series[0]?.xs ?? [];
    console.log(
      `\n50 KB streaming requests with --fix ${FIXES}, one at a time, interleaved (ms; ${mem.length} each):`,
    );
    console.log('state | TTFB p50 | TTFB p99 | total p50 | total p99');
    console.log('--- | --- | --- | --- | ---');
    const row = (label: string, f: (k: 'ttfb' | 'total', p: number) => number) =>
      console.log(
        `${label} | ${f('ttfb', 0.5).toFixed(2)} | ${f('ttfb', 0.99).toFixed(2)} | ${f('total', 0.5).toFixed(2)} | ${f('total', 0.99).toFixed(2)}`,
      );
    for (const s of series) row(s.name, (k, p) => q(s.xs, k, p));
    for (const s of series.slice(1)) row(`${s.name} − memory`, (k, p) => q(s.xs, k, p) - q(mem, k, p));
    const added = q(series[1]?.xs ?? [], 'total', 0.5) - q(mem, 'total', 0.5);
    const sent = WARM_UP + (series[1]?.xs.length ?? 0);
    const failedOpen = states.reduce((n, s) => n + s.failedOpen, 0);
    console.log(
      `\nfloor (at most +0.5 ms p50, total, redis vs memory): ${added <= 0.5 ? 'met' : 'NOT met'}; resolved on the proxy's tracked copy (no read): ${states[0]?.readCache?.cached ?? 0} of ${sent} (round-robin: ${(states[1]?.readCache?.cached ?? 0) + (states[2]?.readCache?.cached ?? 0)}); requests that went out unfixed because Redis was late: ${failedOpen}`,
    );
    for (const p of pools) await p.close();
  } finally {
    for (const c of [...procs.map((p) => p.child), sim.child]) await stopped(c);
    await redis.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
