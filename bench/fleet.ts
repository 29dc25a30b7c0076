// Benchmark: what `--state redis://…` adds to a request against the default memory state, at 50 KB.
// redis-server, `cacheward sim` and two `cacheward proxy --fix …` processes (one on memory, one on Redis)
// on loopback; growing Claude Code-like conversations of ~50 KB, streamed, one request at a time,
// interleaved between the two. Floor: at most +0.5 ms p50. Run: npm run bench:fleet (builds first; ~40 s)

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

async function main() {
  console.log(machineLine('fleet'));
  const redis = await startRedis();
  const sim = await startCli(['sim', '--port', '0']);
  const common = ['proxy', '--port', '0', '--upstream', sim.url, '--capture', 'hashes', '--fix', FIXES];
  const dir = mkdtempSync(join(tmpdir(), 'cacheward-bench-fleet-'));
  const memory = await startCli([...common, '--dir', join(dir, 'memory')]);
  const shared = await startCli([
    ...common,
    '--dir',
    join(dir, 'redis'),
    '--state',
    redis.url,
    '--state-prefix',
    `bench-${process.pid}:`,
  ]);
  try {
    const m = new Pool(memory.url, { connections: 1 });
    const r = new Pool(shared.url, { connections: 1 });
    const mTraffic = conversations(1);
    const rTraffic = conversations(5001);
    const step = async (pool: Pool, g: Generator<{ body: string; session: string }>) => {
      const x = g.next().value as { body: string; session: string };
      return timed(pool, x.body, x.session);
    };
    for (let i = 0; i < 40; i++) {
      await step(m, mTraffic);
      await step(r, rTraffic);
    }
    const mem: Array<{ ttfb: number; total: number }> = [];
    const red: Array<{ ttfb: number; total: number }> = [];
    const until = performance.now() + 25_000;
    let flip = false;
    while (performance.now() < until) {
      // Alternate which goes first, so neither always follows the other's garbage.
      if (flip) {
        red.push(await step(r, rTraffic));
        mem.push(await step(m, mTraffic));
      } else {
        mem.push(await step(m, mTraffic));
        red.push(await step(r, rTraffic));
      }
      flip = !flip;
    }
    const q = (xs: Array<{ ttfb: number; total: number }>, k: 'ttfb' | 'total', p: number) =>
      percentile(
        xs.map((x) => x[k]),
        p,
      );
    const health = (await (await fetch(`${shared.url}/_cacheward/health`)).json()) as {
      state: { failedOpen: number; status: string };
    };
    console.log(
      `\n50 KB streaming requests with --fix ${FIXES}, one at a time, interleaved (ms; ${mem.length} each):`,
    );
    console.log('state | TTFB p50 | TTFB p99 | total p50 | total p99');
    console.log('--- | --- | --- | --- | ---');
    for (const [label, xs] of [
      ['memory', mem],
      ['redis', red],
    ] as const)
      console.log(
        `${label} | ${q(xs, 'ttfb', 0.5).toFixed(2)} | ${q(xs, 'ttfb', 0.99).toFixed(2)} | ${q(xs, 'total', 0.5).toFixed(2)} | ${q(xs, 'total', 0.99).toFixed(2)}`,
      );
    const added = (k: 'ttfb' | 'total', p: number) => q(red, k, p) - q(mem, k, p);
    console.log(
      `redis − memory | ${added('ttfb', 0.5).toFixed(2)} | ${added('ttfb', 0.99).toFixed(2)} | ${added('total', 0.5).toFixed(2)} | ${added('total', 0.99).toFixed(2)}`,
    );
    console.log(
      `\nfloor (at most +0.5 ms p50, total): ${added('total', 0.5) <= 0.5 ? 'met' : 'NOT met'}; requests that went out unfixed because Redis was late: ${health.state.failedOpen}`,
    );
    await m.close();
    await r.close();
  } finally {
    for (const c of [memory.child, shared.child, sim.child]) c.kill('SIGTERM');
    await redis.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
