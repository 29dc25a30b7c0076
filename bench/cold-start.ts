// Benchmark: a fresh `cacheward proxy`'s first exchanges, with the start-up warm-up and with --no-warm-up,
// alternated: time to listen, the first and second request's added latency over a direct call to the
// simulator, and the longest after-response slice and step of those first exchanges (from the proxy's metrics).
// Run: npm run bench:cold-start   (builds first; under a minute; BENCH_SCALE=0.3 for fewer starts)

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Pool } from 'undici';
import { bodyOfSize, machineLine, percentile, SCALE, startCli } from './support.js';

const HEADERS = { 'content-type': 'application/json', 'x-api-key': 'bench-key' };

async function send(pool: Pool, body: string): Promise<number> {
  const t0 = performance.now();
  const res = await pool.request({ path: '/v1/messages', method: 'POST', headers: HEADERS, body });
  await res.body.arrayBuffer();
  if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}`);
  return performance.now() - t0;
}

async function metric(url: string, name: string): Promise<number> {
  const text = await (await fetch(`${url}/_cacheward/metrics`)).text();
  const m = text.match(new RegExp(`^${name} ([0-9.e-]+)$`, 'm'));
  return m ? Number(m[1]) * 1000 : Number.NaN;
}

async function main() {
  console.log(machineLine('cold-start'));
  const sim = await startCli(['sim', '--port', '0']);
  const dirs: string[] = [];
  try {
    const direct = new Pool(sim.url, { connections: 1 });
    // Each start gets bodies no earlier start sent (another conversation), 50 KB, streaming.
    let seed = 500;
    const next = () => JSON.stringify({ ...bodyOfSize(50 * 1024, seed++), stream: true });
    for (let i = 0; i < 50; i++) await send(direct, next());
    const rows = new Map<
      string,
      { listen: number[]; first: number[]; second: number[]; slice: number[]; step: number[] }
    >();
    const starts = Math.max(2, Math.round(6 * SCALE));
    for (let i = 0; i < starts * 2; i++) {
      const warm = i % 2 === 0;
      const name = warm ? 'warm-up (default)' : '--no-warm-up';
      const row = rows.get(name) ?? { listen: [], first: [], second: [], slice: [], step: [] };
      rows.set(name, row);
      const dir = mkdtempSync(join(tmpdir(), 'cacheward-bench-cold-'));
      dirs.push(dir);
      const t0 = performance.now();
      const proxy = await startCli(
        ['proxy', '--port', '0', '--upstream', sim.url, '--dir', dir, ...(warm ? [] : ['--no-warm-up'])],
        { env: { CACHEWARD_SLICE_CPU: '1' } },
      );
      row.listen.push(performance.now() - t0);
      const pool = new Pool(proxy.url, { connections: 1 });
      for (const list of [row.first, row.second]) {
        const body = next();
        const proxied = await send(pool, body);
        const plain = await send(direct, body);
        list.push(proxied - plain);
        await new Promise((r) => setTimeout(r, 200));
      }
      row.slice.push(await metric(proxy.url, 'cacheward_after_response_slice_max_seconds'));
      row.step.push(await metric(proxy.url, 'cacheward_after_response_step_max_seconds'));
      await pool.close();
      const exited = new Promise((r) => proxy.child.once('exit', r));
      proxy.child.kill('SIGTERM');
      await exited;
    }
    await direct.close();
    console.log(
      `\nfirst exchanges of a fresh proxy, 50 KB streaming, ${starts} starts each, alternated (ms, median / worst):`,
    );
    console.log(
      'start | time to listen | 1st request added | 2nd request added | longest after-response slice | longest step',
    );
    console.log('--- | --- | --- | --- | --- | ---');
    const mw = (xs: number[]) => `${percentile(xs, 0.5).toFixed(1)} / ${Math.max(...xs).toFixed(1)}`;
    for (const [name, r] of rows)
      console.log(
        `${name} | ${mw(r.listen)} | ${mw(r.first)} | ${mw(r.second)} | ${mw(r.slice)} | ${mw(r.step)}`,
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
