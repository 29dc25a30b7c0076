// Benchmark: the fix path of one request in process, no HTTP: what `--fix tools-freeze,pin-reminders` does
// between reading a body and forwarding it (parse, resolve, fixes, the forwarded body's prefix) plus the
// state commit at the upstream's status, per appended request of an agent session at 50 KB to 2 MB.
// CACHEWARD_BASE_SRC=<another checkout>/src loads that tree too and alternates the two in one process;
// CACHEWARD_BENCH_PROCESSES=1 runs each tree in a child process of its own instead (what one tree's
// allocations do to the heap, page faults of fresh memory say, then stays out of the other's figures).
// Bench-only: it never opens a socket (the children talk over their IPC channel), nothing in src/ imports it.
// Run: npm run bench:fix-path   (about a minute; BENCH_SCALE=0.3 for a quick look)

import { fork } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { CLAUDE_CODE, GrowingSession } from './growing-session.js';
import { machineLine, percentile, SCALE, slope } from './support.js';

interface Timing {
  wall: number;
  cpu: number;
  /** Minor page faults during the run (fresh memory touched for the first time). */
  faults: number;
}

/** One source tree's fix path: its own builder, state and fixes. */
interface Path {
  name: string;
  /** Wall time and CPU time (this process, user + system) of one request's fix path, ms; page faults. */
  run(body: Buffer, id: string): Promise<Timing>;
  close(): Promise<void>;
}

async function load(name: string, src: string): Promise<Path> {
  const at = (p: string) => import(pathToFileURL(join(src, p)).href);
  const [{ PrefixBuilder }, { MemoryProxyState }, { fixRegistry }, { fixRequest }] = await Promise.all([
    at('prefix/build-prefix.ts'),
    at('state/memory-proxy-state.ts'),
    at('fixes/registry.ts'),
    at('proxy/fix-request.ts'),
  ]);
  const dir = mkdtempSync(join(tmpdir(), 'cacheward-bench-fix-path-'));
  const builder = new PrefixBuilder();
  const state = new MemoryProxyState({ stateDir: dir });
  const fixes = fixRegistry().resolve(['tools-freeze', 'pin-reminders']);
  const headers = new Headers({ 'content-type': 'application/json' });
  return {
    name,
    async run(body, id) {
      const f0 = process.resourceUsage().minorPageFault;
      const t0 = performance.now();
      const c0 = process.cpuUsage();
      const fixed = await fixRequest(
        { fixes, builder, state, log: () => {} },
        {
          id,
          original: body,
          format: 'anthropic-messages',
          provider: 'anthropic',
          route: '/v1/messages',
          requestHeaders: headers,
          start: 1_800_000_000_000 + Number(id.slice(1)) * 1_000,
        },
      );
      if (fixed.prepared) await state.commit(fixed.prepared, '/v1/messages', 200, fixed.after);
      const c = process.cpuUsage(c0);
      const wall = performance.now() - t0;
      return { wall, cpu: (c.user + c.system) / 1000, faults: process.resourceUsage().minorPageFault - f0 };
    },
    async close() {
      await state.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A tree's fix path in a child process of its own: the body goes over IPC, the child times its run. */
async function loadInChild(name: string, src: string): Promise<Path> {
  const child = fork(fileURLToPath(import.meta.url), [], {
    env: { ...process.env, CACHEWARD_FIX_PATH_CHILD: src },
    execArgv: ['--import', 'tsx'],
  });
  const replies: Array<(t: Timing) => void> = [];
  child.on('message', (m) => replies.shift()?.(m as Timing));
  await new Promise<void>((ok, fail) => {
    child.once('message', () => ok());
    child.once('error', fail);
  });
  return {
    name,
    run(body, id) {
      return new Promise((ok) => {
        replies.push(ok);
        child.send({ body: body.toString('latin1'), id });
      });
    },
    async close() {
      child.send({ close: true });
      await new Promise((r) => child.once('exit', r));
    },
  };
}

/** Child mode: one tree's fix path, run on the bodies the parent sends. */
async function child(src: string) {
  const path = await load('child', src);
  process.on('message', async (m: { body?: string; id?: string; close?: boolean }) => {
    if (m.close) {
      await path.close();
      process.disconnect();
      return;
    }
    // Read as the proxy reads a body: into a buffer of its own, before the timed run.
    const body = Buffer.from(m.body ?? '', 'latin1');
    process.send?.(await path.run(body, m.id ?? 'r0'));
  });
  process.send?.({ ready: true });
}

async function main() {
  console.log(machineLine('fix-path'));
  const separate = process.env.CACHEWARD_BENCH_PROCESSES === '1';
  const open = separate ? loadInChild : load;
  const paths = [await open('this tree', join(import.meta.dirname, '../src'))];
  const base = process.env.CACHEWARD_BASE_SRC;
  if (base) paths.push(await open(`base (${base})`, resolve(base)));
  if (separate) console.log('(each tree in a child process of its own)');
  let n = 0;
  // Warm-up: small sessions, one after another (as a sequential client sends them).
  for (let s = 0; s < Math.round(40 * SCALE) + 2; s++) {
    const session = new GrowingSession(9_000 + s, 20_000, 30, CLAUDE_CODE);
    for (let i = 0; i < 30; i++) {
      const body = Buffer.from(session.take());
      for (const p of paths) await p.run(body, `r${n++}`);
    }
  }
  const sizes = [50 * 1024, 512 * 1024, 1024 * 1024, 2048 * 1024];
  const steps = Math.max(8, Math.round(30 * SCALE));
  const times = paths.map(() => new Map<number, Timing[]>());
  for (const size of sizes) {
    for (let s = 0; s < 3; s++) {
      const session = new GrowingSession(size + s, size, steps + 1, CLAUDE_CODE);
      const first = Buffer.from(session.take());
      for (const p of paths) await p.run(first, `r${n++}`);
      for (let i = 0; i < steps; i++) {
        const body = Buffer.from(session.take());
        for (let k = 0; k < paths.length; k++) {
          // Alternate which tree goes first.
          const j = (i + k) % paths.length;
          const list = times[j]?.get(size) ?? [];
          list.push(await (paths[j] as Path).run(body, `r${n++}`));
          times[j]?.set(size, list);
        }
      }
    }
  }
  const mb = sizes.map((s) => s / 1024 / 1024);
  for (const what of ['wall', 'cpu'] as const) {
    console.log(
      what === 'wall'
        ? '\nfix path p50 per appended request, in process (ms): parse, resolve, fixes, forwarded prefix, commit'
        : '\nthe same, CPU time p50 (ms; what a busy machine does not inflate by making it wait for a core)',
    );
    console.log(`tree | ${sizes.map((s) => `${s / 1024} KB`).join(' | ')} | growth (ms per MB)`);
    console.log(`--- | ${sizes.map(() => '---').join(' | ')} | ---`);
    paths.forEach((p, k) => {
      const p50 = sizes.map((s) =>
        percentile(
          (times[k]?.get(s) ?? []).map((t) => t[what]),
          0.5,
        ),
      );
      console.log(`${p.name} | ${p50.map((x) => x.toFixed(2)).join(' | ')} | ${slope(mb, p50).toFixed(2)}`);
    });
  }
  console.log(
    '\nminor page faults per request, p50 (fresh memory touched: a new body-sized buffer faults in every page)',
  );
  paths.forEach((p, k) => {
    const f = sizes.map((s) =>
      percentile(
        (times[k]?.get(s) ?? []).map((t) => t.faults),
        0.5,
      ),
    );
    console.log(`${p.name} | ${f.map((x) => x.toFixed(0)).join(' | ')}`);
  });
  console.log(`(n = ${steps * 3} per size and tree)`);
  for (const p of paths) await p.close();
}

const childSrc = process.env.CACHEWARD_FIX_PATH_CHILD;
(childSrc ? child(childSrc) : main()).catch((err) => {
  console.error(err);
  process.exit(1);
});
