// Benchmark: what `--state redis://…` adds to a request against the default memory state, at 50 KB.
// redis-server, `cacheward sim` and four `cacheward proxy --fix …` processes on loopback: one on memory,
// one on Redis that serves its conversations alone (the load balancer keeps a session on one proxy), and
// two on Redis that take a conversation's turns in turn (round-robin: every turn is read from Redis).
// Growing Claude Code-like conversations of ~50 KB, streamed, one request at a time, interleaved between
// the three. Floor: at most +0.5 ms p50 (sticky). Run: npm run bench:fleet (builds first; ~45 s)

import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Pool } from 'undici';
import { appendUserTurn } from '../src/demo/agent-conversation.js';
import { startRedis } from '../test/state/redis-server.js';
import { bodyOfSize, type Json, machineLine, percentile, startCli } from './support.js';

const FIXES = 'pin-reminders,tools-freeze';
const TURNS_PER_CONVERSATION = 20;

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

async function main() {
  console.log(machineLine('fleet'));
  // Redis as `redis-server --appendonly yes` runs it (README "Running a fleet"): the file fsynced every second.
  const redis = await startRedis({ appendfsync: 'everysec' });
  const sim = await startCli(['sim', '--port', '0']);
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
    for (let i = 0; i < 40; i++) for (const s of series) await s.send();
    const until = performance.now() + 30_000;
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
    const sent = 40 + (series[1]?.xs.length ?? 0);
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
