// Benchmark: what a proxy keeps as agent traffic flows through it. 200 agent sessions of 30 turns each
// (6,000 requests, ~470 MB of bodies, 20 KB to 135 KB, each turn its session's previous body and one more
// tool-loop turn), 32 in flight, turn by turn across the sessions, through the built `cacheward proxy` in
// front of `cacheward sim`; beside it in the same run a bare Node hop (bench/bare-proxy.mjs), the build
// before a change (CACHEWARD_BASE_BIN) and the peer (CACHEWARD_PEER_CMD, a command that starts it with the
// upstream in $UPSTREAM and prints its URL), each in turn on the same traffic. Prints each one's RSS (from
// /proc) every 200 requests, and the CPU time it used: the trade of what it keeps against what it computes.
// Run: npm run bench:memory-curve   (builds first; about 4 minutes per target on a quiet 2-core machine;
//   CACHEWARD_BENCH_SESSIONS / CACHEWARD_BENCH_TURNS change the shape, CACHEWARD_BENCH_FIXES=0 skips the
//   fixed run; CACHEWARD_BENCH_IDLE_S=40 also reads each one's RSS and heap after that long idle, once V8 gave
//   back what it no longer needs: what it keeps of the conversations apart from what the traffic needs).

import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Pool } from 'undici';
import { agentConversation } from '../src/sim/agent-conversation.js';
import { machineLine, startCli, startCommand, startNode } from './support.js';

const SESSIONS = Number(process.env.CACHEWARD_BENCH_SESSIONS ?? 200);
const TURNS = Number(process.env.CACHEWARD_BENCH_TURNS ?? 30);
const CONCURRENCY = 32;
const EVERY = 200;
const MB = 1024 * 1024;
const HEADERS = {
  'content-type': 'application/json',
  'x-api-key': 'bench-key',
  'anthropic-version': '2023-06-01',
};

/** Session `s` at turn `t`: its first `t` tool-loop turns whole, then the user's next question. */
function body(s: number, t: number): string {
  const whole = agentConversation({ turns: t + 1, seed: 1000 + s });
  const messages = (whole.messages as Array<{ content: Array<Record<string, unknown>> }>).slice(0, 4 * t + 1);
  const last = messages[messages.length - 1] as { content: Array<Record<string, unknown>> };
  last.content = last.content.map((b, i) =>
    i === last.content.length - 1 ? { ...b, cache_control: { type: 'ephemeral' } } : b,
  );
  return JSON.stringify({
    ...whole,
    stream: true,
    metadata: { user_id: `user_bench_account__session_${s.toString(16).padStart(8, '0')}-curve` },
    messages,
  });
}

/** Resident memory and CPU time (user + system) of a process, from /proc. */
function proc(pid: number): { rss: number; cpuMs: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const rss = Number(status.match(/^VmRSS:\s+(\d+) kB$/m)?.[1] ?? 0) * 1024;
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticks = Number(fields[11]) + Number(fields[12]);
  return { rss, cpuMs: ticks * 10 };
}

interface Target {
  name: string;
  start(upstream: string): Promise<{ child: ChildProcess; url: string }>;
}

/** Each target's RSS after CACHEWARD_BENCH_IDLE_S idle, printed after the table. */
const idle: string[] = [];

async function run(target: Target, upstream: string): Promise<number[]> {
  const { child, url } = await target.start(upstream);
  const pid = child.pid as number;
  const pool = new Pool(url, { connections: CONCURRENCY });
  const curve: number[] = [proc(pid).rss];
  const cpu0 = proc(pid).cpuMs;
  const total = SESSIONS * TURNS;
  let next = 0;
  let done = 0;
  let bytes = 0;
  const t0 = performance.now();
  try {
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < total) {
          const i = next++;
          const payload = body(i % SESSIONS, Math.floor(i / SESSIONS));
          bytes += payload.length;
          const res = await pool.request({
            path: '/v1/messages',
            method: 'POST',
            headers: HEADERS,
            body: payload,
          });
          await res.body.arrayBuffer();
          if (res.statusCode !== 200) throw new Error(`${target.name}: status ${res.statusCode}`);
          if (++done % EVERY === 0) curve.push(proc(pid).rss);
        }
      }),
    );
    const secs = (performance.now() - t0) / 1000;
    const cpu = (proc(pid).cpuMs - cpu0) / 1000;
    // What it keeps once traffic stops: 3 s quiet, then RSS again.
    await new Promise((r) => setTimeout(r, 3_000));
    const quiet = proc(pid).rss;
    // A cacheward proxy also says how its memory is made up (V8's heap, committed and used; buffers).
    const health = await fetch(`${url}/_cacheward/health`)
      .then((r) => (r.ok ? (r.json() as Promise<{ memory?: Record<string, number> }>) : undefined))
      .catch(() => undefined);
    const m = health?.memory;
    const mb = (x: number) => (x / MB).toFixed(0);
    const idleS = Number(process.env.CACHEWARD_BENCH_IDLE_S ?? 0);
    if (idleS > 0) {
      await new Promise((r) => setTimeout(r, idleS * 1000));
      const later = await fetch(`${url}/_cacheward/health`)
        .then((r) => (r.ok ? (r.json() as Promise<{ memory?: Record<string, number> }>) : undefined))
        .catch(() => undefined);
      const lm = later?.memory;
      idle.push(
        `${target.name}: RSS ${mb(proc(pid).rss)} MB after ${idleS} s idle${lm ? ` (heap ${mb(lm.heapUsed ?? 0)} of ${mb(lm.heapTotal ?? 0)}, external ${mb(lm.external ?? 0)})` : ''}`,
      );
    }
    const warm = curve[Math.min(curve.length - 1, Math.ceil((SESSIONS * 3) / EVERY))] ?? 0;
    const peak = Math.max(...curve);
    console.log(
      `${target.name}${m ? ` (heap ${mb(m.heapUsed ?? 0)} of ${mb(m.heapTotal ?? 0)}, external ${mb(m.external ?? 0)})` : ''} | ${mb(curve[0] ?? 0)} | ${mb(warm)} | ${mb(curve[curve.length - 1] ?? 0)} | ${mb(peak)} | ${mb(quiet)} | ${(done / secs).toFixed(0)} | ${cpu.toFixed(1)} s (${((cpu * 1000) / done).toFixed(2)} ms/req) | ${(bytes / 1e6).toFixed(0)} MB`,
    );
    return curve;
  } finally {
    await pool.close();
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
  }
}

async function main() {
  console.log(machineLine('memory-curve'));
  console.log(`${SESSIONS} sessions x ${TURNS} turns, ${CONCURRENCY} in flight, streaming`);
  const sim = await startCli(['sim', '--port', '0']);
  const dirs: string[] = [];
  const cacheward =
    (fixes: boolean, bin?: string): Target['start'] =>
    (upstream) => {
      const dir = mkdtempSync(join(tmpdir(), 'cacheward-bench-curve-'));
      dirs.push(dir);
      const args = [
        'proxy',
        '--port',
        '0',
        '--upstream',
        upstream,
        '--dir',
        dir,
        '--quiet',
        '--capture',
        process.env.CACHEWARD_BENCH_CAPTURE ?? 'hashes',
      ];
      if (fixes) args.push('--fix', 'tools-freeze,pin-reminders');
      return startCli(args, bin ? { bin } : {});
    };
  const targets: Target[] = [
    { name: 'bare hop', start: (u) => startNode([join(import.meta.dirname, 'bare-proxy.mjs'), u]) },
  ];
  const peer = process.env.CACHEWARD_PEER_CMD;
  if (peer)
    targets.push({
      name: 'peer',
      start: (u) => startCommand('sh', ['-c', peer], { UPSTREAM: u }),
    });
  const base = process.env.CACHEWARD_BASE_BIN;
  const withFixes = process.env.CACHEWARD_BENCH_FIXES !== '0';
  for (const fixes of withFixes ? [false, true] : [false]) {
    const label = fixes ? 'hashes, --fix tools-freeze,pin-reminders' : 'hashes';
    targets.push({ name: `cacheward (${label})`, start: cacheward(fixes) });
    if (base) targets.push({ name: `base build (${label})`, start: cacheward(fixes, base) });
  }
  // CACHEWARD_BENCH_ONLY=word runs only the targets whose name holds it (e.g. `fix`, `bare`).
  const only = process.env.CACHEWARD_BENCH_ONLY;
  const chosen = only ? targets.filter((t) => t.name.includes(only)) : targets;
  const curves: Array<[string, number[]]> = [];
  try {
    console.log(
      '\ntarget | RSS idle MB | RSS after 3 turns each | RSS at end | peak | RSS 3 s after | req/s | CPU | bodies',
    );
    console.log('--- | --- | --- | --- | --- | --- | --- | --- | ---');
    for (const t of chosen) curves.push([t.name, await run(t, sim.url)]);
    if (idle.length) console.log(`\n${idle.join('\n')}`);
    console.log(`\nRSS (MB) every ${EVERY} requests:`);
    console.log(`requests | ${curves.map(([n]) => n).join(' | ')}`);
    console.log(`--- | ${curves.map(() => '---').join(' | ')}`);
    const rows = Math.max(...curves.map(([, c]) => c.length));
    for (let i = 0; i < rows; i++)
      console.log(
        `${i * EVERY} | ${curves
          .map(([, c]) => {
            const x = c[i];
            return x === undefined ? '' : (x / MB).toFixed(0);
          })
          .join(' | ')}`,
      );
  } finally {
    sim.child.kill('SIGTERM');
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
