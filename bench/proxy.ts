// Benchmark: the proxy in front of the simulator, both as child processes on loopback, beside a bare Node
// pass-through proxy (bench/bare-proxy.mjs, the floor) in the same interleaved run. Latency each adds over a
// direct call (TTFB and total, p50/p99) for 50 KB and 1 MB streaming requests with capture `hashes` and
// `full`; p50/p99 and throughput at 32 concurrent clients with distinct bodies for direct, bare and cacheward;
// the longest the proxy's event loop was held; capture bytes over a 200-turn conversation.
// Run: npm run bench:proxy   (builds first; about 3 minutes; BENCH_SCALE=0.3 for a quick look;
// CACHEWARD_BASE_BIN=<another build's dist/cli/bin.js> adds that build, interleaved, for a before/after)

import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Pool } from 'undici';
import { agentConversation, appendUserTurn } from '../src/sim/agent-conversation.js';
import {
  bodyOfSize,
  loopProbeArgs,
  machineLine,
  percentile,
  readLoopProbe,
  SCALE,
  startCli,
  startNode,
} from './support.js';

const HEADERS = { 'content-type': 'application/json', 'x-api-key': 'bench-key' };

interface Sample {
  ttfb: number;
  total: number;
}

async function timed(pool: Pool, body: string): Promise<Sample> {
  const t0 = performance.now();
  const res = await pool.request({ path: '/v1/messages', method: 'POST', headers: HEADERS, body });
  const ttfb = performance.now() - t0;
  await res.body.arrayBuffer();
  if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}`);
  return { ttfb, total: performance.now() - t0 };
}

/** Distinct bodies of about `size` bytes (one seed each), streaming. */
function bodies(size: number, count: number, seed0: number): string[] {
  return Array.from({ length: count }, (_, i) =>
    JSON.stringify({ ...bodyOfSize(size, seed0 + i), stream: true }),
  );
}

const q = (xs: number[], p: number) => percentile(xs, p);
const f2 = (x: number) => x.toFixed(2);

/** `n` requests through `pool` from `clients` concurrent clients, each on its own body. */
async function warm(pool: Pool, list: string[], n: number, clients: number): Promise<void> {
  let left = n;
  await Promise.all(
    Array.from({ length: clients }, async (_, c) => {
      while (left-- > 0) await timed(pool, list[c % list.length] as string);
    }),
  );
}

/** The proxy's own figure for its longest after-response slice (and the CPU it used) and step, from its metrics. */
async function afterResponseSlices(url: string): Promise<string> {
  const text = await (await fetch(`${url}/_cacheward/metrics`)).text();
  const ms = (name: string) => {
    const m = text.match(new RegExp(`^${name} ([0-9.]+)$`, 'm'));
    return m ? `${(Number(m[1]) * 1000).toFixed(2)} ms` : 'n/a';
  };
  // Its CPU time tells a slice that worked long (or collected garbage) from one the process spent preempted.
  return `${ms('cacheward_after_response_slice_max_seconds')} (process CPU in it ${ms('cacheward_after_response_slice_max_cpu_seconds')}; longest step ${ms('cacheward_after_response_step_max_seconds')})`;
}

/** The proxy's cumulative histogram of after-response slice lengths: upper bound (ms) to count, and the total. */
async function sliceHistogram(url: string): Promise<Map<string, number>> {
  const text = await (await fetch(`${url}/_cacheward/metrics`)).text();
  const out = new Map<string, number>();
  for (const m of text.matchAll(/^cacheward_after_response_slice_seconds_bucket\{le="([^"]+)"\} (\d+)$/gm))
    out.set(m[1] as string, Number(m[2]));
  return out;
}

/**
 * How many slices of one stretch of traffic went past 5 and 20 ms (the histogram read before and after it):
 * the longest slice above is since the start, the first cold requests of the warm-up included.
 */
function phaseSlices(before: Map<string, number>, after: Map<string, number>): string {
  const d = (le: string) => (after.get(le) ?? 0) - (before.get(le) ?? 0);
  const all = d('+Inf');
  if (!after.size) return 'n/a';
  return `${all} slices, ${all - d('0.005')} over 5 ms, ${all - d('0.02')} over 20 ms`;
}

async function main() {
  console.log(machineLine('proxy'));
  const sim = await startCli(['sim', '--port', '0']);
  const children: ChildProcess[] = [sim.child];
  const dirs: string[] = [];
  const bare = await startNode([join(import.meta.dirname, 'bare-proxy.mjs'), sim.url]);
  children.push(bare.child);
  /** Starts a proxy capturing into a fresh temporary folder that is removed when the bench ends. */
  const base = process.env.CACHEWARD_BASE_BIN;
  const startCapturing = async (
    capture: 'hashes' | 'full',
    purpose: string,
    probe?: string,
    bin?: string,
  ) => {
    const dir = mkdtempSync(join(tmpdir(), `cacheward-bench-${purpose}-${capture}-`));
    dirs.push(dir);
    const probed = probe ? loopProbeArgs(probe) : undefined;
    // The proxy also tells the CPU time its longest after-response slice used (preempted, or busy).
    const env = { ...probed?.env, CACHEWARD_SLICE_CPU: '1' };
    const proxy = await startCli(
      ['proxy', '--port', '0', '--upstream', sim.url, '--capture', capture, '--dir', dir],
      { ...(probed ? { node: probed.node } : {}), env, ...(bin ? { bin } : {}) },
    );
    children.push(proxy.child);
    // The probe counts from when the proxy listens: its start-up (the warm-up before it listens) holds no
    // client's request.
    if (probe) await readLoopProbe(proxy.child, probe);
    return { proxy, dir };
  };
  try {
    const direct = new Pool(sim.url, { connections: 32 });
    const barePool = new Pool(bare.url, { connections: 32 });
    const small = bodies(50 * 1024, 32, 100);
    const large = bodies(1024 * 1024, 4, 200);
    const probeFile = join(mkdtempSync(join(tmpdir(), 'cacheward-bench-probe-')), 'loop.json');
    dirs.push(join(probeFile, '..'));
    console.log(
      '\nadded latency over a direct call, streaming, sequential, interleaved and rotated with the bare hop (ms):',
    );
    console.log(
      'body | capture | bare total p50 | bare total p99 | TTFB p50 | TTFB p99 | total p50 | total p99 | cacheward/bare p50 | direct total p50 | n',
    );
    console.log('--- | --- | --- | --- | --- | --- | --- | --- | --- | --- | ---');
    let bareSmallP50 = 0;
    let loopMax = 0;
    for (const capture of ['hashes', 'full'] as const) {
      const { proxy } = await startCapturing(capture, 'latency', probeFile);
      const proxied = new Pool(proxy.url, { connections: 32 });
      const baseProxy = base
        ? (await startCapturing(capture, 'latency-base', `${probeFile}.base`, base)).proxy
        : undefined;
      const basePool = baseProxy ? new Pool(baseProxy.url, { connections: 32 }) : undefined;
      // The proxy needs about 2,500 requests to settle (JIT, buffers); the others get a few hundred.
      await warm(proxied, small, Math.round(2500 * Math.min(1, SCALE * 2)), 8);
      if (basePool) await warm(basePool, small, Math.round(2500 * Math.min(1, SCALE * 2)), 8);
      await warm(barePool, small, 300, 8);
      await warm(direct, small, 300, 8);
      for (const [label, list] of [
        ['50 KB', small],
        ['1 MB', large],
      ] as const) {
        for (let i = 0; i < 20; i++) await timed(proxied, list[i % list.length] as string);
        if (basePool) for (let i = 0; i < 20; i++) await timed(basePool, list[i % list.length] as string);
        const d: Sample[] = [];
        const b: Sample[] = [];
        const p: Sample[] = [];
        const pb: Sample[] = [];
        const targets: Array<[Pool, Sample[]]> = [
          [direct, d],
          [barePool, b],
          [proxied, p],
          ...(basePool ? [[basePool, pb] as [Pool, Sample[]]] : []),
        ];
        const until = performance.now() + (list === large ? 14_000 : 10_000) * SCALE;
        for (let i = 0; performance.now() < until; i++) {
          const body = list[i % list.length] as string;
          for (let k = 0; k < targets.length; k++) {
            const [pool, out] = targets[(i + k) % targets.length] as [Pool, Sample[]];
            out.push(await timed(pool, body));
          }
        }
        const added = (xs: Sample[], k: 'ttfb' | 'total', at: number) =>
          q(
            xs.map((x) => x[k]),
            at,
          ) -
          q(
            d.map((x) => x[k]),
            at,
          );
        const bareP50 = added(b, 'total', 0.5);
        if (label === '50 KB' && capture === 'hashes') bareSmallP50 = bareP50;
        const row = (name: string, xs: Sample[]) =>
          console.log(
            `${label} | ${name} | ${f2(bareP50)} | ${f2(added(b, 'total', 0.99))} | ${f2(added(xs, 'ttfb', 0.5))} | ${f2(added(xs, 'ttfb', 0.99))} | ${f2(added(xs, 'total', 0.5))} | ${f2(added(xs, 'total', 0.99))} | ${(added(xs, 'total', 0.5) / Math.max(0.01, bareP50)).toFixed(2)}× | ${f2(
              q(
                d.map((x) => x.total),
                0.5,
              ),
            )} | ${xs.length}`,
          );
        row(capture, p);
        if (basePool) row(`${capture} (base build)`, pb);
      }
      loopMax = Math.max(loopMax, (await readLoopProbe(proxy.child, probeFile)).max);
      if (capture === 'hashes') {
        // 32 clients, each on its own 50 KB body; direct, bare and cacheward in rotated phases.
        await readLoopProbe(proxy.child, probeFile);
        if (baseProxy) await readLoopProbe(baseProxy.child, `${probeFile}.base`);
        const slicesBefore = await sliceHistogram(proxy.url);
        const baseSlicesBefore = baseProxy ? await sliceHistogram(baseProxy.url) : undefined;
        const targets: Array<[string, Pool]> = [
          ['direct', direct],
          ['bare hop', barePool],
          ['cacheward (hashes)', proxied],
          ...(basePool ? [['cacheward base build (hashes)', basePool] as [string, Pool]] : []),
        ];
        const lat = new Map<string, number[]>(targets.map(([n]) => [n, []]));
        const secs = new Map<string, number>(targets.map(([n]) => [n, 0]));
        for (let round = 0; round < 4; round++) {
          for (let k = 0; k < targets.length; k++) {
            const [name, pool] = targets[(round + k) % targets.length] as [string, Pool];
            const end = performance.now() + 2500 * SCALE;
            const t0 = performance.now();
            await Promise.all(
              Array.from({ length: 32 }, async (_, c) => {
                while (performance.now() < end)
                  lat.get(name)?.push((await timed(pool, small[c] as string)).total);
              }),
            );
            secs.set(name, (secs.get(name) ?? 0) + (performance.now() - t0) / 1000);
          }
        }
        const underLoad = await readLoopProbe(proxy.child, probeFile);
        loopMax = Math.max(loopMax, underLoad.max);
        const slices = await afterResponseSlices(proxy.url);
        const phase = phaseSlices(slicesBefore, await sliceHistogram(proxy.url));
        const basePhase =
          baseProxy && baseSlicesBefore
            ? phaseSlices(baseSlicesBefore, await sliceHistogram(baseProxy.url))
            : undefined;
        const baseLoad = baseProxy ? await readLoopProbe(baseProxy.child, `${probeFile}.base`) : undefined;
        console.log(
          '\n32 concurrent clients, each on its own 50 KB agent body, streaming (rotated phases, ms):',
        );
        console.log('target | requests/s | total p50 | total p99 | n');
        console.log('--- | --- | --- | --- | ---');
        for (const [name] of targets) {
          const xs = lat.get(name) ?? [];
          console.log(
            `${name} | ${(xs.length / (secs.get(name) ?? 1)).toFixed(0)} | ${f2(q(xs, 0.5))} | ${f2(q(xs, 0.99))} | ${xs.length}`,
          );
        }
        const dp99 = q(lat.get('direct') ?? [], 0.99);
        const cp99 = q(lat.get('cacheward (hashes)') ?? [], 0.99);
        // The bare hop's own p99 in the same phases is the floor it reaches itself (its added p99 under load is
        // far more than its sequential p50, which the first comparison adds).
        const bp99 = q(lat.get('bare hop') ?? [], 0.99);
        console.log(
          `cacheward p99 ${f2(cp99)} against direct p99 + the bare hop's 50 KB p50 = ${f2(dp99 + bareSmallP50)} (the bare hop's own p99 here: ${f2(bp99)}); the proxy's event loop under this load: max delay ${f2(underLoad.max)} ms, p99 ${f2(underLoad.p99)} ms; longest after-response slice ${slices}; after-response slices in this phase: ${phase}`,
        );
        if (baseLoad)
          console.log(
            `base build p99 ${f2(q(lat.get('cacheward base build (hashes)') ?? [], 0.99))}; its event loop under this load: max delay ${f2(baseLoad.max)} ms, p99 ${f2(baseLoad.p99)} ms; after-response slices in this phase: ${basePhase ?? 'n/a'}`,
          );
      }
      await proxied.close();
      await basePool?.close();
      proxy.child.kill('SIGTERM');
      baseProxy?.child.kill('SIGTERM');
    }
    console.log(`\nlongest the proxy's event loop was held in these runs: ${f2(loopMax)} ms\n`);
    await direct.close();
    await barePool.close();

    // Capture storage over a 200-turn growing conversation, full mode and hashes mode. Agent turns (a
    // question, a tool call, a ~3.6 KB file read, an answer) as real agents send; and tiny turns (a short
    // user line and "Done."), the worst case for per-record overhead; and the agent turns in Claude Code's
    // key order (messages, then system, then tools: every turn moves the tools' and system's bytes).
    for (const [capture, turnKind] of [
      ['full', 'agent'],
      ['hashes', 'agent'],
      ['full', 'tiny'],
      ['full', 'claude-code'],
      ['hashes', 'claude-code'],
    ] as const) {
      const { proxy, dir } = await startCapturing(capture, 'store');
      const pool = new Pool(proxy.url, { connections: 1 });
      let conv = agentConversation({ turns: 1, seed: 3 });
      let raw = 0;
      for (let turn = 0; turn < 200; turn++) {
        if (turnKind !== 'tiny') conv = agentConversation({ turns: turn + 1, seed: 3 });
        const { model, max_tokens, messages, system, tools, ...rest } = conv as Record<string, unknown>;
        const text = JSON.stringify(
          turnKind === 'claude-code' ? { model, max_tokens, messages, system, tools, ...rest } : conv,
        );
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
