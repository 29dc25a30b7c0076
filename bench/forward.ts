// Benchmark: forward mode (CONNECT to api.anthropic.com, TLS with the local CA, decrypted into the proxy)
// against base-URL mode (plain HTTP to the proxy), both in front of the simulator as child processes, with
// a bare baseline (straight to the simulator) in the same run: added latency (sequential, interleaved;
// kept connections, and a new connection per request: CONNECT and the TLS handshake) and throughput with
// concurrent clients. Run: npm run bench:forward   (builds first; about 90 s; BENCH_SCALE=0.3 for a look)

import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Dispatcher, Pool, ProxyAgent } from 'undici';
import { bodyOfSize, machineLine, percentile, SCALE, startCli } from './support.js';

const HEADERS = { 'content-type': 'application/json', 'x-api-key': 'bench-key' };
const PROVIDER = 'https://api.anthropic.com';

interface Target {
  name: string;
  dispatcher: Dispatcher;
  origin: string;
}

/** One streamed request; ms to the first byte and to the end. */
async function timed(t: Target, body: string): Promise<{ ttfb: number; total: number; bytes: number }> {
  const t0 = performance.now();
  const res = await t.dispatcher.request({
    origin: t.origin,
    path: '/v1/messages',
    method: 'POST',
    headers: { ...HEADERS },
    body,
  });
  const ttfb = performance.now() - t0;
  const buf = await res.body.arrayBuffer();
  if (res.statusCode !== 200)
    throw new Error(`${t.name}: status ${res.statusCode}: ${Buffer.from(buf).toString().slice(0, 300)}`);
  return { ttfb, total: performance.now() - t0, bytes: buf.byteLength + body.length };
}

const bodies = (size: number, count: number, seed: number) =>
  Array.from({ length: count }, (_, i) => JSON.stringify({ ...bodyOfSize(size, seed + i), stream: true }));
const f2 = (x: number) => x.toFixed(2);

async function main() {
  console.log(machineLine('forward'));
  const root = mkdtempSync(join(tmpdir(), 'cacheward-bench-forward-'));
  const children: ChildProcess[] = [];
  const closers: Array<() => Promise<unknown>> = [];
  try {
    const sim = await startCli(['sim', '--port', '0', '--no-auth']);
    children.push(sim.child);
    const common = ['--port', '0', '--upstream', sim.url, '--capture', 'hashes'];
    const base = await startCli(['proxy', ...common, '--dir', join(root, 'base')]);
    children.push(base.child);
    const caDir = join(root, 'ca');
    const fwd = await startCli([
      'proxy',
      ...common,
      '--dir',
      join(root, 'fwd'),
      '--forward',
      '--ca-dir',
      caDir,
    ]);
    children.push(fwd.child);
    const ca = readFileSync(join(caDir, 'cacheward-ca.pem'), 'utf8');
    const pool = (url: string) => new Pool(url, { connections: 32 });
    const proxied = () => new ProxyAgent({ uri: fwd.url, requestTls: { ca }, connections: 32 });
    const targets: Target[] = [
      { name: 'direct (bare)', dispatcher: pool(sim.url), origin: sim.url },
      { name: 'base URL', dispatcher: pool(base.url), origin: base.url },
      { name: 'forward', dispatcher: proxied(), origin: PROVIDER },
    ];
    for (const t of targets) closers.push(() => t.dispatcher.close());
    const small = bodies(50 * 1024, 16, 300);

    // Warm every path (JIT, TLS session, the proxies' first exchanges).
    for (const t of targets)
      for (let i = 0; i < Math.round(400 * SCALE) + 20; i++) await timed(t, small[i % 16] as string);

    console.log('\nlatency, 50 KB streaming requests, sequential, interleaved and rotated (ms):');
    console.log('path | TTFB p50 | TTFB p99 | total p50 | total p99 | added p50 over direct | added p99 | n');
    console.log('--- | --- | --- | --- | --- | --- | --- | ---');
    const samples = targets.map(() => [] as Array<{ ttfb: number; total: number }>);
    const until = performance.now() + 20_000 * SCALE;
    for (let i = 0; performance.now() < until; i++) {
      for (let k = 0; k < targets.length; k++) {
        const j = (i + k) % targets.length;
        samples[j]?.push(await timed(targets[j] as Target, small[i % 16] as string));
      }
    }
    const q = (xs: Array<{ ttfb: number; total: number }>, k: 'ttfb' | 'total', p: number) =>
      percentile(
        xs.map((x) => x[k]),
        p,
      );
    const direct = samples[0] as Array<{ ttfb: number; total: number }>;
    targets.forEach((t, j) => {
      const xs = samples[j] as Array<{ ttfb: number; total: number }>;
      console.log(
        `${t.name} | ${f2(q(xs, 'ttfb', 0.5))} | ${f2(q(xs, 'ttfb', 0.99))} | ${f2(q(xs, 'total', 0.5))} | ${f2(q(xs, 'total', 0.99))} | ${f2(q(xs, 'total', 0.5) - q(direct, 'total', 0.5))} | ${f2(q(xs, 'total', 0.99) - q(direct, 'total', 0.99))} | ${xs.length}`,
      );
    });

    // A new connection per request: base URL pays a TCP connect, forward a CONNECT and a TLS handshake.
    console.log('\nlatency with a new connection per request (ms, total p50 / p99):');
    const fresh: Record<string, number[]> = { 'base URL': [], forward: [] };
    const freshUntil = performance.now() + 10_000 * SCALE;
    for (let i = 0; performance.now() < freshUntil; i++) {
      for (const name of i % 2 ? ['forward', 'base URL'] : ['base URL', 'forward']) {
        const dispatcher = name === 'forward' ? proxied() : new Pool(base.url, { connections: 1 });
        const t = { name, dispatcher, origin: name === 'forward' ? PROVIDER : base.url };
        fresh[name]?.push((await timed(t, small[i % 16] as string)).total);
        await dispatcher.close();
      }
    }
    for (const [name, xs] of Object.entries(fresh))
      console.log(`${name}: ${f2(percentile(xs, 0.5))} / ${f2(percentile(xs, 0.99))} (n ${xs.length})`);

    console.log('\nthroughput, 16 concurrent clients, 50 KB streaming requests, 8 s per path:');
    console.log('path | requests/s | MB/s (both ways) | total p50 ms | total p99 ms');
    console.log('--- | --- | --- | --- | ---');
    for (const t of targets) {
      const lat: number[] = [];
      let bytes = 0;
      const started = performance.now();
      const stop = started + 8_000 * SCALE;
      await Promise.all(
        Array.from({ length: 16 }, async (_, c) => {
          for (let i = c; performance.now() < stop; i += 16) {
            const r = await timed(t, small[i % 16] as string);
            lat.push(r.total);
            bytes += r.bytes;
          }
        }),
      );
      const secs = (performance.now() - started) / 1000;
      console.log(
        `${t.name} | ${(lat.length / secs).toFixed(0)} | ${(bytes / secs / 1e6).toFixed(1)} | ${f2(percentile(lat, 0.5))} | ${f2(percentile(lat, 0.99))}`,
      );
    }
  } finally {
    for (const c of closers) await c().catch(() => {});
    for (const c of children) c.kill('SIGTERM');
    rmSync(root, { recursive: true, force: true });
  }
}

await main();
