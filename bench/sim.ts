// Benchmark: the simulator over HTTP on loopback. Requests per second with 16 concurrent clients on 50 KB
// bodies; p50/p99 latency for 1 MB bodies, non-streaming and streaming; memory over a million cache entries.
// Run: npm run bench:sim   (builds, starts `cacheward sim` in a child process; about 80 s;
// CACHEWARD_BASE_BIN=<another build's dist/cli/bin.js> adds that build to the throughput phase, interleaved:
// ROUNDS rotated rounds, default 4)

import { readFileSync } from 'node:fs';
import { Pool } from 'undici';
import { EntryStore } from '../dist/internal.js';
import { bodyOfSize, machineLine, percentile, startCli } from './support.js';

/** A simulator child and a pool to it; `send` reads every response whole and checks its status. */
async function startSim(bin?: string) {
  const { child, url } = await startCli(['sim', '--port', '0'], bin ? { bin } : {});
  const pool = new Pool(url, { connections: 32, pipelining: 1 });
  const headers = { 'content-type': 'application/json', 'x-api-key': 'bench-key' };
  const send = async (body: string | Buffer) => {
    const res = await pool.request({ path: '/v1/messages', method: 'POST', headers, body });
    await res.body.arrayBuffer();
    if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}`);
  };
  const stop = async () => {
    await pool.close();
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
  };
  return { child, send, stop };
}

/** A process's user + system CPU so far, in ms (Linux /proc), or undefined elsewhere. */
function cpuMs(pid: number | undefined): number | undefined {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
    const ticks = Number(fields[11]) + Number(fields[12]);
    return Number.isFinite(ticks) ? ticks * 10 : undefined;
  } catch {
    return undefined;
  }
}

/**
 * 16 clients, each sending its own ~50 KB conversation over and over (the first request writes, then
 * reads), for `seconds` after a 2 s warm-up: requests per second, and CPU per request of both processes.
 */
async function throughput(bodies: Buffer[], seconds: number, bin?: string) {
  const sim = await startSim(bin);
  try {
    for (const b of bodies) await sim.send(b);
    const warm = performance.now() + 2000;
    await Promise.all(
      bodies.map(async (b) => {
        while (performance.now() < warm) await sim.send(b);
      }),
    );
    let done = 0;
    const end = performance.now() + seconds * 1000;
    const simBefore = cpuMs(sim.child.pid);
    const ownBefore = process.cpuUsage();
    const t0 = performance.now();
    await Promise.all(
      bodies.map(async (b) => {
        while (performance.now() < end) {
          await sim.send(b);
          done++;
        }
      }),
    );
    const elapsed = (performance.now() - t0) / 1000;
    const simAfter = cpuMs(sim.child.pid);
    const own = process.cpuUsage(ownBefore);
    const simUs =
      simBefore === undefined || simAfter === undefined ? undefined : ((simAfter - simBefore) * 1000) / done;
    return { perSecond: done / elapsed, done, elapsed, simUs, loadUs: (own.user + own.system) / done };
  } finally {
    await sim.stop();
  }
}

async function main() {
  console.log(machineLine('sim'));
  // 1. Throughput: 16 clients, each with its own ~50 KB conversation.
  const bodies = Array.from({ length: 16 }, (_, i) =>
    Buffer.from(JSON.stringify(bodyOfSize(50 * 1024, i + 1))),
  );
  const size = (bodies[0] as Buffer).length;
  const base = process.env.CACHEWARD_BASE_BIN;
  const builds: Array<[string, string | undefined]> = base
    ? [
        ['base', base],
        ['this build', undefined],
      ]
    : [['this build', undefined]];
  const rounds = base ? Number(process.env.ROUNDS ?? 4) : 1;
  const seconds = base ? 6 : 10;
  console.log(
    `\nthroughput, 16 concurrent clients, ${(size / 1024).toFixed(0)} KB bodies (2 s warm-up, then ${seconds} s; every response read whole, its status checked):`,
  );
  console.log('build | round | requests/s | requests | sim CPU µs/request | load generator CPU µs/request');
  console.log('--- | --- | --- | --- | --- | ---');
  const rates = new Map<string, number[]>();
  for (let r = 0; r < rounds; r++) {
    // Rotated: base first in odd rounds, this build first in even ones.
    for (const [name, bin] of r % 2 ? [...builds].reverse() : builds) {
      const t = await throughput(bodies, seconds, bin);
      rates.set(name, [...(rates.get(name) ?? []), t.perSecond]);
      console.log(
        `${name} | ${r + 1} | ${t.perSecond.toFixed(0)} | ${t.done} in ${t.elapsed.toFixed(1)} s | ${t.simUs?.toFixed(0) ?? 'n/a'} | ${t.loadUs.toFixed(0)}`,
      );
    }
  }
  for (const [name, v] of rates) {
    console.log(
      `throughput (${name}): ${(v.reduce((a, b) => a + b, 0) / v.length).toFixed(0)} requests/s${v.length > 1 ? ` (mean of ${v.length})` : ''}`,
    );
  }

  const { send, stop } = await startSim();
  try {
    // 2. Latency at 1 MB, non-streaming and streaming, one request at a time.
    const big = bodyOfSize(1024 * 1024, 99);
    const bigText = JSON.stringify(big);
    const bigStream = JSON.stringify({ ...big, stream: true });
    console.log(`\nlatency, ${(Buffer.byteLength(bigText) / 1e6).toFixed(2)} MB body, sequential (ms):`);
    console.log('mode | p50 | p99 | n');
    console.log('--- | --- | --- | ---');
    for (const [mode, text] of [
      ['non-streaming', bigText],
      ['streaming', bigStream],
    ] as const) {
      for (let i = 0; i < 5; i++) await send(text);
      const times: number[] = [];
      const stop = performance.now() + 8000;
      while (performance.now() < stop || times.length < 50) {
        const t = performance.now();
        await send(text);
        times.push(performance.now() - t);
      }
      console.log(
        `${mode} | ${percentile(times, 0.5).toFixed(2)} | ${percentile(times, 0.99).toFixed(2)} | ${times.length}`,
      );
    }
  } finally {
    await stop();
  }

  // 3. Memory over a million entries: the simulator's EntryStore, 1,000,000 writes over two virtual hours
  //    (5-minute TTL), swept as the simulator sweeps on every request.
  const store = new EntryStore();
  const gc = (globalThis as { gc?: () => void }).gc;
  gc?.();
  const before = process.memoryUsage().heapUsed;
  let peakEntries = 0;
  const start = Date.UTC(2026, 0, 1);
  const n = 1_000_000;
  for (let i = 0; i < n; i++) {
    const now = start + Math.floor((i / n) * 2 * 60 * 60_000);
    if (i % 1000 === 0) store.sweep(now);
    store.write(`scope|${i.toString(36)}-${(i * 2654435761) >>> 0}`, 1000, 5 * 60_000, now, 'w', now);
    if (store.size > peakEntries) peakEntries = store.size;
  }
  gc?.();
  const after = process.memoryUsage().heapUsed;
  console.log(
    `\nmemory: 1,000,000 writes over 2 virtual hours: peak ${peakEntries.toLocaleString('en-US')} live entries, ${store.size.toLocaleString('en-US')} at the end, ${store.stats.expired.toLocaleString('en-US')} expired and evicted; heap +${((after - before) / 1e6).toFixed(0)} MB`,
  );
  const capped = new EntryStore({ maxEntries: 200_000 });
  for (let i = 0; i < n; i++) capped.write(`k${i}`, 1, 60 * 60_000, start, 'w', start);
  console.log(
    `memory: 1,000,000 writes within one TTL into a store capped at 200,000: ${capped.size.toLocaleString('en-US')} kept, ${capped.stats.evicted.toLocaleString('en-US')} evicted`,
  );
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
