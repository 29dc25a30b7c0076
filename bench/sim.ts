// Benchmark: the simulator over HTTP on loopback. Requests per second with 16 concurrent clients on 50 KB
// bodies; p50/p99 latency for 1 MB bodies, non-streaming and streaming; memory over a million cache entries.
// Run: npm run bench:sim   (builds, starts `cacheward sim` in a child process; about a minute)

import { Pool } from 'undici';
import { EntryStore } from '../dist/index.js';
import { bodyOfSize, machineLine, percentile, startCli } from './support.js';

async function main() {
  console.log(machineLine('sim'));
  const { child, url } = await startCli(['sim', '--port', '0']);
  const pool = new Pool(url, { connections: 32, pipelining: 1 });
  const headers = { 'content-type': 'application/json', 'x-api-key': 'bench-key' };
  const send = async (body: string | Buffer) => {
    const res = await pool.request({ path: '/v1/messages', method: 'POST', headers, body });
    await res.body.arrayBuffer();
    if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}`);
  };
  try {
    // 1. Throughput: 16 clients, each with its own ~50 KB conversation (the first request writes, then reads).
    const bodies = Array.from({ length: 16 }, (_, i) =>
      Buffer.from(JSON.stringify(bodyOfSize(50 * 1024, i + 1))),
    );
    const size = (bodies[0] as Buffer).length;
    for (const b of bodies) await send(b);
    let done = 0;
    const seconds = 10;
    const end = performance.now() + seconds * 1000;
    const t0 = performance.now();
    await Promise.all(
      bodies.map(async (b) => {
        while (performance.now() < end) {
          await send(b);
          done++;
        }
      }),
    );
    const elapsed = (performance.now() - t0) / 1000;
    console.log(
      `\nthroughput: ${(done / elapsed).toFixed(0)} requests/s, 16 concurrent clients, ${(size / 1024).toFixed(0)} KB bodies (${done} requests in ${elapsed.toFixed(1)} s)`,
    );

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
    await pool.close();
    child.kill('SIGTERM');
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
