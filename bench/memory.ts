// Benchmark: the proxy's memory under many conversations. The built `cacheward proxy` in front of `cacheward sim`
// (child processes, loopback), Claude Code-shaped small bodies (the agent tools, a billing line and a system
// prompt, a system-reminder, metadata.user_id with a session; not streamed, to fit the time), each
// conversation one turn longer per request, 32 in flight. Reports RSS and heap (from /_cacheward/health)
// after each level (live heap: after the proxy's own full collection), with and without
// `--fix tools-freeze,pin-reminders`, and RSS as distinct conversations pass the state's bound (10,000).
// Run: npm run bench:memory   (builds first; about 2 minutes on a quiet 2-core machine)
//   CACHEWARD_BENCH_MEMORY=full adds the 100,000-request level (20,000 conversations) and takes the distinct
//   conversations to 100,000 (10+ minutes: run it once for the README).
//   CACHEWARD_BENCH_MEMORY=distinct runs only the distinct-conversation part, CACHEWARD_BENCH_DISTINCT of them
//   (default 40,000) in steps of 10,000; CACHEWARD_BENCH_SNAPSHOTS=DIR writes a heap snapshot of the proxy
//   into DIR after each step (node --heapsnapshot-signal), to diff by constructor.

import type { ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Pool } from 'undici';
import type { ProcessMemory } from '../src/proxy/memory-release.js';
import { AGENT_TOOL_NAMES, anthropicTool } from '../src/sim/agent-conversation.js';
import { machineLine, startCli } from './support.js';

const MODE = process.env.CACHEWARD_BENCH_MEMORY;
const FULL = MODE === 'full';
const DISTINCT_ONLY = MODE === 'distinct';
const SNAPSHOTS = process.env.CACHEWARD_BENCH_SNAPSHOTS;
/** An older build (its dist/cli/bin.js) to run beside this one in the distinct-conversation part. */
const BASE_BIN = process.env.CACHEWARD_BASE_BIN;
const CONCURRENCY = 32;
const HEADERS = {
  'content-type': 'application/json',
  'x-api-key': 'bench-key',
  'anthropic-version': '2023-06-01',
};
const MB = 1024 * 1024;

const TOOLS = AGENT_TOOL_NAMES.map((n) => anthropicTool(n));
const SYSTEM = [
  { type: 'text', text: 'x-anthropic-billing-header: cc_version=2.1.195; cc_entrypoint=cli;' },
  {
    type: 'text',
    text: `You are Claude Code, a careful coding agent. ${'Follow the repository conventions and test every change. '.repeat(40)}`,
    cache_control: { type: 'ephemeral' },
  },
];

/** Conversation `c`'s request at turn `t` (0-based): the history so far, then a new user turn. */
function body(c: number, t: number): string {
  const messages: unknown[] = [
    {
      role: 'user',
      content: [
        {
          type: 'text',
          text: `<system-reminder>\nThe working directory is /home/dev/project-${c}. Today is 2026-12-01.\n</system-reminder>`,
        },
        { type: 'text', text: `Conversation ${c}: look at the failing test and fix it.` },
      ],
    },
  ];
  for (let i = 1; i <= t; i++) {
    messages.push({ role: 'assistant', content: [{ type: 'text', text: `Step ${i - 1} of ${c} is done.` }] });
    messages.push({
      role: 'user',
      content: [{ type: 'text', text: `Turn ${i}: go on with the next step.` }],
    });
  }
  const last = messages[messages.length - 1] as { content: Array<Record<string, unknown>> };
  (last.content[last.content.length - 1] as Record<string, unknown>).cache_control = { type: 'ephemeral' };
  return JSON.stringify({
    model: 'claude-opus-5',
    max_tokens: 1024,
    stream: false,
    metadata: { user_id: `user_bench_account__session_${c.toString(16).padStart(8, '0')}-bench` },
    tools: TOOLS,
    system: SYSTEM,
    messages,
  });
}

async function send(pool: Pool, payload: string): Promise<void> {
  const res = await pool.request({ path: '/v1/messages', method: 'POST', headers: HEADERS, body: payload });
  await res.body.arrayBuffer();
  if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}`);
}

/** Runs `jobs` with CONCURRENCY in flight. */
async function pooled(count: number, job: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < count) await job(next++);
    }),
  );
}

interface Health {
  /** `collections` is missing from builds before it was reported. */
  memory: Omit<ProcessMemory, 'collections' | 'collectionMaxMs'> & {
    collections?: number;
    collectionMaxMs?: number;
  };
}

async function health(url: string): Promise<Health> {
  return (await (await fetch(`${url}/_cacheward/health`)).json()) as Health;
}

/**
 * The live heap, not the garbage: one 8 MB request makes the proxy run its own full collection once it has
 * been quiet for a second (proxy/memory-release.ts, at most every 10 s), then health is read.
 */
async function settled(url: string, pool: Pool, dir: string): Promise<Health> {
  // The state file (with fixes) is written at most once a second after the last turn: let its last write
  // end first (unchanged for 2.5 s), or its document (10 MB at 10,000 conversations) is counted as live.
  const file = join(dir, 'state', 'conversations.json');
  const stamp = () => (existsSync(file) ? statSync(file).mtimeMs : 0);
  for (let last = stamp(), quiet = 0; quiet < 2_500; ) {
    await new Promise((r) => setTimeout(r, 500));
    const now = stamp();
    quiet = now === last ? quiet + 500 : 0;
    last = now;
  }
  const before = (await health(url)).memory.collections;
  const big = JSON.stringify({
    model: 'claude-opus-5',
    max_tokens: 16,
    messages: [{ role: 'user', content: 'x'.repeat(8 * MB) }],
  });
  // Its answer does not matter (the simulator refuses a prompt past the context window): it went through.
  const res = await pool.request({ path: '/v1/messages', method: 'POST', headers: HEADERS, body: big });
  await res.body.arrayBuffer();
  // Two small count_tokens calls after it, so the prefix builder's last two bodies (what it extends from)
  // are not the 8 MB one: the figures are the state's, not this probe's. Neither is a turn: nothing is
  // committed, so no state-file write runs while the heap is read.
  for (let i = 0; i < 2; i++) {
    const r = await pool.request({
      path: '/v1/messages/count_tokens',
      method: 'POST',
      headers: HEADERS,
      body: body(999_000 + i, 0),
    });
    await r.body.arrayBuffer();
  }
  // Until the proxy says its collection ran (a collection after a burst can put the large body's off by up
  // to 10 s; an older build without the count: 4 s), then the second one 2 s after it.
  for (let waited = 0; waited < 20_000; waited += 500) {
    await new Promise((r) => setTimeout(r, 500));
    const h = await health(url);
    if (before === undefined ? waited >= 3_500 : (h.memory.collections ?? 0) > before) break;
  }
  await new Promise((r) => setTimeout(r, 2_500));
  return health(url);
}

const fmt = (h: Health) =>
  `RSS ${(h.memory.rss / MB).toFixed(0)} MB, heap ${(h.memory.heapUsed / MB).toFixed(0)} of ${(h.memory.heapTotal / MB).toFixed(0)} MB, external ${(h.memory.external / MB).toFixed(0)} MB (buffers ${(h.memory.arrayBuffers / MB).toFixed(0)}), ${h.memory.conversations.toLocaleString('en-US')} conversations held${h.memory.collections === undefined ? '' : `, ${h.memory.collections} collections (longest ${h.memory.collectionMaxMs} ms)`}`;

/** Has the proxy write a heap snapshot into SNAPSHOTS (named by `label`) and waits until it is complete. */
async function snapshot(url: string, child: ChildProcess, label: string): Promise<void> {
  if (!SNAPSHOTS) return;
  const before = new Set(readdirSync(SNAPSHOTS));
  child.kill('SIGUSR2');
  for (;;) {
    await new Promise((r) => setTimeout(r, 1_000));
    // The snapshot is written on the proxy's main thread: it answers health once the file is complete
    // (a health call that times out meanwhile is asked again).
    if (
      !(await health(url).then(
        () => true,
        () => false,
      ))
    )
      continue;
    const file = readdirSync(SNAPSHOTS).find((f) => !before.has(f) && f.endsWith('.heapsnapshot'));
    if (!file) continue;
    const size = statSync(join(SNAPSHOTS, file)).size;
    if (size === 0) continue;
    console.log(`  (heap snapshot ${label}: ${join(SNAPSHOTS, file)}, ${(size / MB).toFixed(0)} MB)`);
    return;
  }
}

async function withProxy<T>(
  sim: string,
  fixes: boolean,
  run: (url: string, pool: Pool, child: ChildProcess, dir: string) => Promise<T>,
  bin?: string,
): Promise<T> {
  const dir = mkdtempSync(join(tmpdir(), 'cacheward-bench-memory-'));
  const args = ['proxy', '--port', '0', '--upstream', sim, '--dir', dir, '--quiet'];
  if (fixes) args.push('--fix', 'tools-freeze,pin-reminders');
  let proxy: { child: ChildProcess; url: string } | undefined;
  try {
    if (SNAPSHOTS) mkdirSync(SNAPSHOTS, { recursive: true });
    const node = SNAPSHOTS ? ['--heapsnapshot-signal=SIGUSR2', `--diagnostic-dir=${SNAPSHOTS}`] : [];
    proxy = await startCli(args, { node, ...(bin ? { bin } : {}) });
    const pool = new Pool(proxy.url, { connections: CONCURRENCY });
    try {
      return await run(proxy.url, pool, proxy.child, dir);
    } finally {
      await pool.close();
    }
  } finally {
    proxy?.child.kill('SIGTERM');
    if (proxy) await new Promise((r) => proxy?.child.once('exit', r));
    rmSync(dir, { recursive: true, force: true });
  }
}

/** `conversations` conversations of `requests / conversations` turns each, turn by turn across all of them. */
async function level(
  url: string,
  pool: Pool,
  dir: string,
  first: number,
  requests: number,
  conversations: number,
) {
  const turns = Math.round(requests / conversations);
  const start = performance.now();
  for (let t = 0; t < turns; t++) await pooled(conversations, (i) => send(pool, body(first + i, t)));
  const ms = performance.now() - start;
  return { h: await settled(url, pool, dir), ms };
}

async function main() {
  console.log(machineLine('memory'));
  const sim = await startCli(['sim', '--port', '0']);
  const t0 = performance.now();
  try {
    const levels: Array<[number, number]> = DISTINCT_ONLY
      ? []
      : [[2_000, 200], [20_000, 2_000], ...(FULL ? ([[100_000, 20_000]] as Array<[number, number]>) : [])];
    console.log('\nrequests | conversations | fixes | after | req/s');
    console.log('--- | --- | --- | --- | ---');
    for (const [requests, conversations] of levels) {
      for (const fixes of [false, true]) {
        await withProxy(sim.url, fixes, async (url, pool, _child, dir) => {
          const start = await health(url);
          const { h, ms } = await level(url, pool, dir, 0, requests, conversations);
          const rate = requests / (ms / 1000);
          console.log(
            `${requests.toLocaleString('en-US')} | ${conversations.toLocaleString('en-US')} | ${fixes ? 'tools-freeze,pin-reminders' : 'none'} | ${fmt(h)} (idle at start: RSS ${(start.memory.rss / MB).toFixed(0)} MB) | ${rate.toFixed(0)}`,
          );
        });
      }
    }
    // Distinct conversations, one request each (the worst case for per-conversation state), with fixes.
    const distinct = DISTINCT_ONLY
      ? Number(process.env.CACHEWARD_BENCH_DISTINCT ?? 40_000)
      : FULL
        ? 100_000
        : 15_000;
    const step = DISTINCT_ONLY ? 10_000 : distinct / (FULL ? 5 : 3);
    console.log(
      `\n${distinct.toLocaleString('en-US')} distinct conversations, one request each, with fixes:`,
    );
    // With CACHEWARD_BASE_BIN, an older build runs beside this one, step by step in turn (same machine load).
    const builds: Array<[string, string | undefined]> = [['this build', undefined]];
    if (BASE_BIN) builds.push([`base (${BASE_BIN})`, BASE_BIN]);
    type Running = { name: string; url: string; pool: Pool; child: ChildProcess; dir: string };
    const nest = async (i: number, running: Running[]): Promise<void> => {
      const build = builds[i];
      if (!build) return distinctRun(running);
      await withProxy(
        sim.url,
        true,
        (url, pool, child, dir) => nest(i + 1, [...running, { name: build[0], url, pool, child, dir }]),
        build[1],
      );
    };
    const distinctRun = async (running: Running[]) => {
      for (const r of running) console.log(`- ${r.name}, idle: ${fmt(await health(r.url))}`);
      for (let done = 0; done < distinct; done += step) {
        const turn = done / step;
        // Alternate which build goes first, so neither always runs on the busier half of the step.
        const order = turn % 2 === 0 ? running : [...running].reverse();
        for (const r of order) {
          await pooled(step, (i) => send(r.pool, body(1_000_000 + done + i, 0)));
          const h = await settled(r.url, r.pool, r.dir);
          console.log(`- ${r.name}, after ${(done + step).toLocaleString('en-US')}: ${fmt(h)}`);
          await snapshot(r.url, r.child, `${r.name} after ${done + step}`);
        }
      }
    };
    await nest(0, []);
  } finally {
    sim.child.kill('SIGTERM');
    await new Promise((r) => sim.child.once('exit', r));
  }
  console.log(`\n(${((performance.now() - t0) / 1000).toFixed(0)} s)`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
