// Benchmark: the proxy in front of the simulator, both as child processes on loopback. Latency the proxy
// adds (time to first byte and total, p50/p99) for 50 KB and 1 MB streaming requests with capture
// `hashes` and `full`; throughput at 32 concurrent clients; capture bytes over a 200-turn conversation.
// Run: npm run bench:proxy   (builds first; about 90 s)

import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Pool } from 'undici';
import { agentConversation, appendUserTurn } from '../src/demo/agent-conversation.js';
import { bodyOfSize, machineLine, percentile, startCli } from './support.js';

const HEADERS = { 'content-type': 'application/json', 'x-api-key': 'bench-key' };

async function timed(pool: Pool, body: string): Promise<{ ttfb: number; total: number }> {
  const t0 = performance.now();
  const res = await pool.request({ path: '/v1/messages', method: 'POST', headers: HEADERS, body });
  const ttfb = performance.now() - t0;
  await res.body.arrayBuffer();
  if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}`);
  return { ttfb, total: performance.now() - t0 };
}

async function main() {
  console.log(machineLine('proxy'));
  const sim = await startCli(['sim', '--port', '0']);
  const children: ChildProcess[] = [sim.child];
  const dirs: string[] = [];
  /** Starts a proxy capturing into a fresh temporary folder that is removed when the bench ends. */
  const startCapturing = async (capture: 'hashes' | 'full', purpose: string) => {
    const dir = mkdtempSync(join(tmpdir(), `cacheward-bench-${purpose}-${capture}-`));
    dirs.push(dir);
    const proxy = await startCli([
      'proxy',
      '--port',
      '0',
      '--upstream',
      sim.url,
      '--capture',
      capture,
      '--dir',
      dir,
    ]);
    children.push(proxy.child);
    return { proxy, dir };
  };
  try {
    const direct = new Pool(sim.url, { connections: 32 });
    console.log('\nadded latency over a direct call, streaming, sequential, interleaved (ms):');
    console.log('body | capture | TTFB p50 | TTFB p99 | total p50 | total p99 | direct total p50 | n');
    console.log('--- | --- | --- | --- | --- | --- | --- | ---');
    for (const capture of ['hashes', 'full'] as const) {
      const { proxy } = await startCapturing(capture, 'latency');
      const proxied = new Pool(proxy.url, { connections: 32 });
      for (const [label, size] of [
        ['50 KB', 50 * 1024],
        ['1 MB', 1024 * 1024],
      ] as const) {
        const body = JSON.stringify({ ...bodyOfSize(size, size), stream: true });
        for (let i = 0; i < 10; i++) {
          await timed(direct, body);
          await timed(proxied, body);
        }
        const d: Array<{ ttfb: number; total: number }> = [];
        const p: Array<{ ttfb: number; total: number }> = [];
        const until = performance.now() + (size > 100_000 ? 12_000 : 8_000);
        while (performance.now() < until) {
          d.push(await timed(direct, body));
          p.push(await timed(proxied, body));
        }
        const diff = (k: 'ttfb' | 'total', q: number) =>
          (
            percentile(
              p.map((x) => x[k]),
              q,
            ) -
            percentile(
              d.map((x) => x[k]),
              q,
            )
          ).toFixed(2);
        console.log(
          `${label} | ${capture} | ${diff('ttfb', 0.5)} | ${diff('ttfb', 0.99)} | ${diff('total', 0.5)} | ${diff('total', 0.99)} | ${percentile(
            d.map((x) => x.total),
            0.5,
          ).toFixed(2)} | ${p.length}`,
        );
      }
      if (capture === 'hashes') {
        const body = JSON.stringify({ ...bodyOfSize(50 * 1024, 7), stream: true });
        let done = 0;
        const end = performance.now() + 8000;
        const t0 = performance.now();
        await Promise.all(
          Array.from({ length: 32 }, async () => {
            while (performance.now() < end) {
              await timed(proxied, body);
              done++;
            }
          }),
        );
        console.log(
          `\nthroughput through the proxy (capture hashes), 32 concurrent clients, 50 KB streaming: ${(done / ((performance.now() - t0) / 1000)).toFixed(0)} requests/s\n`,
        );
      }
      await proxied.close();
      proxy.child.kill('SIGTERM');
    }
    await direct.close();

    // Capture storage over a 200-turn growing conversation, full mode and hashes mode. Agent turns (a
    // question, a tool call, a ~3.6 KB file read, an answer) as real agents send; and tiny turns (a short
    // user line and "Done."), the worst case for per-record overhead.
    for (const [capture, turnKind] of [
      ['full', 'agent'],
      ['hashes', 'agent'],
      ['full', 'tiny'],
    ] as const) {
      const { proxy, dir } = await startCapturing(capture, 'store');
      const pool = new Pool(proxy.url, { connections: 1 });
      let conv = agentConversation({ turns: 1, seed: 3 });
      let raw = 0;
      for (let turn = 0; turn < 200; turn++) {
        if (turnKind === 'agent') conv = agentConversation({ turns: turn + 1, seed: 3 });
        const text = JSON.stringify(conv);
        raw += Buffer.byteLength(text);
        const res = await pool.request({
          path: '/v1/messages',
          method: 'POST',
          headers: { ...HEADERS, 'x-cacheward-session': 'bench' },
          body: text,
        });
        await res.body.arrayBuffer();
        if (turnKind === 'tiny') conv = appendUserTurn(conv, `turn ${turn}: go on`);
      }
      await pool.close();
      const exited = new Promise((r) => proxy.child.once('exit', r));
      proxy.child.kill('SIGTERM');
      await exited;
      const stored = readdirSync(dir).reduce((a, n) => a + statSync(join(dir, n)).size, 0);
      console.log(
        `capture ${capture}, 200 ${turnKind} turns: ${(raw / 1e6).toFixed(1)} MB of request bodies, ${(stored / 1e6).toFixed(2)} MB of capture files = ${((stored / raw) * 100).toFixed(2)}% (${(stored / 200 / 1024).toFixed(1)} KB per request)`,
      );
    }
  } finally {
    for (const c of children) c.kill('SIGTERM');
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
