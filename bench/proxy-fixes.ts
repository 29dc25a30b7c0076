// Benchmark: what `--fix tools-freeze,pin-reminders` costs per request on an agent-shaped Opus 5 session
// that grows by one exchange per request (as Claude Code sends it), at 50 KB to 2 MB of conversation: added
// p50 over a direct call to the simulator, and its growth in ms per MB. Proxies without fixes, two bare Node
// hops (bench/bare-proxy.mjs, which streams the body through, and bench/bare-buffered-proxy.mjs, which holds
// the whole body first as a fixing proxy must), and (with CACHEWARD_BASE_BIN=<another build's
// dist/cli/bin.js>) an earlier build with fixes run interleaved (in a seeded shuffle per step) in the same run, so before/after figures
// share the machine's load. The growth of what fixes add is given over the no-fix proxy and over the
// buffered hop: the raw growth includes moving twice the bytes through one more process.
// Run: npm run bench:proxy-fixes   (builds first; about 2–3 minutes; BENCH_SCALE=0.3 for a quick look)

import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Pool } from 'undici';
import { seededRandom } from '../src/sim/agent-conversation.js';
import { CLAUDE_CODE, GrowingSession } from './growing-session.js';
import {
  loopProbeArgs,
  machineLine,
  percentile,
  readLoopProbe,
  SCALE,
  slope,
  startCli,
  startNode,
} from './support.js';

const HEADERS = { 'content-type': 'application/json', 'x-api-key': 'bench-key' };
const FIXES = 'tools-freeze,pin-reminders';

interface Target {
  name: string;
  pool: Pool;
  child?: ChildProcess;
  /** A bare hop: not warmed up, no event-loop probe. */
  hop?: boolean;
  probe?: string;
  totals: Map<number, number[]>;
  /** CPU time the process spent per request, by body size (ms; Linux only). */
  cpu: Map<number, number>;
}

/** CPU time (user + system, ms) a process has used, from /proc; undefined where there is none. */
function cpuMs(child: ChildProcess | undefined): number | undefined {
  if (!child?.pid) return undefined;
  try {
    const stat = readFileSync(`/proc/${child.pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // utime and stime are fields 14 and 15 of the line (11 and 12 after the command name), in ticks.
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS;
  } catch {
    return undefined;
  }
}
/** Linux's USER_HZ: 100 on every architecture Node runs on. */
const CLOCK_TICKS = 100;

async function timed(pool: Pool, body: string): Promise<number> {
  const t0 = performance.now();
  const res = await pool.request({ path: '/v1/messages', method: 'POST', headers: HEADERS, body });
  await res.body.arrayBuffer();
  if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}: ${pool}`);
  return performance.now() - t0;
}

async function main() {
  console.log(machineLine('proxy-fixes'));
  const children: ChildProcess[] = [];
  const dirs: string[] = [];
  const tmp = (name: string) => {
    const d = mkdtempSync(join(tmpdir(), `cacheward-bench-fixes-${name}-`));
    dirs.push(d);
    return d;
  };
  const sim = await startCli(['sim', '--port', '0']);
  children.push(sim.child);
  try {
    const targets: Target[] = [
      { name: 'direct', pool: new Pool(sim.url, { connections: 8 }), totals: new Map(), cpu: new Map() },
    ];
    const addProxy = async (name: string, fix: boolean, bin?: string) => {
      const dir = tmp(name.replace(/\W+/g, '-'));
      const probe = join(dir, 'loop.json');
      const args = ['proxy', '--port', '0', '--upstream', sim.url, '--capture', 'hashes', '--dir', dir];
      if (fix) args.push('--fix', FIXES);
      const p = await startCli(args, { ...loopProbeArgs(probe), ...(bin ? { bin } : {}) });
      children.push(p.child);
      targets.push({
        name,
        pool: new Pool(p.url, { connections: 8 }),
        child: p.child,
        probe,
        totals: new Map(),
        cpu: new Map(),
      });
    };
    for (const [name, script] of [
      ['bare hop (body streamed)', 'bare-proxy.mjs'],
      ['bare hop (whole body first)', 'bare-buffered-proxy.mjs'],
    ] as const) {
      const hop = await startNode([join(import.meta.dirname, script), sim.url]);
      children.push(hop.child);
      targets.push({
        name,
        pool: new Pool(hop.url, { connections: 8 }),
        child: hop.child,
        hop: true,
        totals: new Map(),
        cpu: new Map(),
      });
    }
    await addProxy('cacheward, no fixes', false);
    await addProxy(`cacheward --fix ${FIXES}`, true);
    const base = process.env.CACHEWARD_BASE_BIN;
    if (base) await addProxy(`earlier build (${base}) --fix ${FIXES}`, true, base);

    // Warm-up: about 2,500 appended requests per proxy on small sessions of their own (4 at a time).
    const warmups = Math.round(2500 * Math.min(1, SCALE * 2));
    let seed = 1000;
    for (const t of targets.filter((x) => x.child && !x.hop)) {
      let left = warmups;
      await Promise.all(
        Array.from({ length: 4 }, async () => {
          while (left > 0) {
            const s = new GrowingSession(seed++, 20_000, 40, CLAUDE_CODE);
            for (let i = 0; i < 40 && left-- > 0; i++) await timed(t.pool, s.take());
          }
        }),
      );
    }
    for (const t of targets) if (t.child && t.probe) await readLoopProbe(t.child, t.probe);

    // The order targets are called in, per step. A rotation (the same cyclic order from a different start)
    // puts each target after the same one nearly every time: the fixed proxy after the no-fix proxy, whose
    // work after each response (~13 ms of CPU at 1 MB) then shares the 2 cores with it, and the direct call
    // after the last proxy. A shuffle per step (seeded) gives every target every predecessor alike;
    // CACHEWARD_BENCH_ORDER=rotate keeps the rotation, to compare with runs made before.
    const rotate = process.env.CACHEWARD_BENCH_ORDER === 'rotate';
    const rand = seededRandom(7);
    const orderOf = (i: number): number[] => {
      const order = targets.map((_, k) => (i + k) % targets.length);
      if (rotate) return order;
      for (let k = order.length - 1; k > 0; k--) {
        const j = Math.floor(rand() * (k + 1));
        [order[k], order[j]] = [order[j] as number, order[k] as number];
      }
      return order;
    };
    const sizes = [50 * 1024, 512 * 1024, 1024 * 1024, 2048 * 1024];
    const steps = Math.max(8, Math.round(30 * SCALE));
    for (const size of sizes) {
      const cpuUsed = targets.map(() => 0);
      // Three sessions per size, their first request (a new conversation) not measured.
      for (let s = 0; s < 3; s++) {
        const session = new GrowingSession(seed++, size, steps + 1, CLAUDE_CODE);
        const first = session.take();
        for (const t of targets) await timed(t.pool, first);
        // CPU is counted over the appended requests only (once the first one's after-response work is done).
        await new Promise((r) => setTimeout(r, 100));
        const cpuBefore = targets.map((t) => cpuMs(t.child));
        for (let i = 0; i < steps; i++) {
          const body = session.take();
          const order = orderOf(i);
          for (let k = 0; k < targets.length; k++) {
            const t = targets[order[k] as number] as Target;
            const list = t.totals.get(size) ?? [];
            list.push(await timed(t.pool, body));
            t.totals.set(size, list);
          }
        }
        await new Promise((r) => setTimeout(r, 100));
        targets.forEach((t, k) => {
          const before = cpuBefore[k];
          const after = cpuMs(t.child);
          if (before !== undefined && after !== undefined) cpuUsed[k] = (cpuUsed[k] ?? 0) + after - before;
        });
      }
      // CPU per appended request, all of it (the work after each response included).
      targets.forEach((t, k) => {
        if (cpuMs(t.child) !== undefined) t.cpu.set(size, (cpuUsed[k] ?? 0) / (3 * steps));
      });
    }
    const direct = targets[0] as Target;
    console.log(
      `\nadded total p50 over a direct call, appended requests, interleaved and ${rotate ? 'rotated' : 'shuffled'} (ms):`,
    );
    console.log(
      `proxy | ${sizes.map((s) => `${s >= 1024 * 1024 ? `${s / 1024 / 1024} MB` : `${s / 1024} KB`}`).join(' | ')} | growth (ms per MB) | event loop max (ms)`,
    );
    console.log(`--- | ${sizes.map(() => '---').join(' | ')} | --- | ---`);
    const mb = sizes.map((s) => s / 1024 / 1024);
    const addedBy = new Map<string, number[]>();
    for (const t of targets.slice(1)) {
      const added = sizes.map(
        (s) => percentile(t.totals.get(s) ?? [], 0.5) - percentile(direct.totals.get(s) ?? [], 0.5),
      );
      addedBy.set(t.name, added);
      const loop = t.child && t.probe ? await readLoopProbe(t.child, t.probe) : undefined;
      console.log(
        `${t.name} | ${added.map((a) => a.toFixed(2)).join(' | ')} | ${slope(mb, added).toFixed(2)} | ${loop ? loop.max.toFixed(1) : '-'}`,
      );
    }
    // What the fixes themselves add: each fixed proxy over the no-fix proxy and over the buffered bare hop.
    for (const t of targets.filter((x) => x.name.includes('--fix'))) {
      for (const over of ['cacheward, no fixes', 'bare hop (whole body first)']) {
        const a = addedBy.get(t.name) ?? [];
        const b = addedBy.get(over) ?? [];
        const diff = a.map((x, i) => x - (b[i] ?? 0));
        console.log(
          `${t.name} − ${over} | ${diff.map((d) => d.toFixed(2)).join(' | ')} | ${slope(mb, diff).toFixed(2)} |`,
        );
      }
    }
    console.log(
      `direct total p50 (ms) | ${sizes.map((s) => percentile(direct.totals.get(s) ?? [], 0.5).toFixed(2)).join(' | ')} | | (n = ${steps * 3} per size and target)`,
    );
    if (targets.some((t) => t.cpu.size)) {
      console.log(
        '\nCPU time per request, same run (ms; immune to waiting for a busy CPU, not to sharing it):',
      );
      console.log(`process | ${sizes.map((s) => `${s / 1024} KB`).join(' | ')} | growth (ms per MB)`);
      console.log(`--- | ${sizes.map(() => '---').join(' | ')} | ---`);
      const cpuOf = (t: Target) => sizes.map((s) => t.cpu.get(s) ?? 0);
      for (const t of targets.filter((x) => x.cpu.size)) {
        const c = cpuOf(t);
        console.log(`${t.name} | ${c.map((x) => x.toFixed(2)).join(' | ')} | ${slope(mb, c).toFixed(2)}`);
      }
      const plain = targets.find((t) => t.name === 'cacheward, no fixes');
      for (const t of targets.filter((x) => x.name.includes('--fix') && x.cpu.size && plain)) {
        const diff = cpuOf(t).map((x, i) => x - (cpuOf(plain as Target)[i] ?? 0));
        console.log(
          `${t.name} − no fixes | ${diff.map((x) => x.toFixed(2)).join(' | ')} | ${slope(mb, diff).toFixed(2)}`,
        );
      }
    }
    for (const t of targets) await t.pool.close();
  } finally {
    for (const c of children) c.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 300));
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
