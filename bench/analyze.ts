// Benchmark: `cacheward report`'s analysis over generated full-mode captures of growing conversations (each
// request one short turn longer): 20,000 requests as 100 sessions x 200 turns beside JSON.parse of the same
// bodies, and one 2,000-turn session.
// Then, from hashes-mode captures whose blocks are generated directly (a body of 10,000 turns is ~1 MB, and
// parsing every turn's body would take most of an hour): one 10,000-turn session, and 100,000 requests as
// 500 sessions x 200 turns, with the usage a warm cache reports. Requests/s, raw request MB/s, peak RSS.
// Run: npm run bench:analyze   (builds; about 6 minutes)
// CACHEWARD_BASE_DIST=<other tree>/dist/index.js also analyzes each capture with that build, alternated with
// this one, CACHEWARD_BENCH_RUNS times each (default 2 with a base, else 1): a before/after in one run.
// CACHEWARD_BENCH_KEEP=1 keeps the generated captures. CACHEWARD_BENCH_NODE_ARGS (e.g. "--heap-prof --heap-prof-dir=DIR") is passed to the analysing child.

import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { PrefixBuilder } from '../dist/index.js';
import { AnthropicCache, CaptureWriter, normalizeAnthropicUsage } from '../dist/internal.js';
import { type CapturedBlock, type CaptureRecord, capturePrefix } from '../src/record/capture-record.js';
import { anthropicTool } from '../src/sim/agent-conversation.js';
import { type Json, machineLine } from './support.js';

/** Time (ms) JSON.parse took over every request body generated so far: the baseline a report is held to. */
let jsonParseMs = 0;

async function generate(
  dir: string,
  sessions: number,
  turns: number,
): Promise<{ raw: number; requests: number }> {
  let raw = 0;
  for (let s = 0; s < sessions; s++)
    raw += await generateSession(dir, `bench-${s}`, turns, s * turns, DISTINCT);
  return { raw, requests: sessions * turns };
}

/**
 * CACHEWARD_BENCH_DISTINCT=1: each session's messages name it, as real sessions' differ. By default every
 * session sends the same messages under its own system prompt, so each message ends where ninety-nine
 * other sessions' requests end too: the conversation model's hardest case, not a common one.
 */
const DISTINCT = process.env.CACHEWARD_BENCH_DISTINCT === '1';

async function generateSession(
  dir: string,
  session: string,
  N: number,
  offset: number,
  distinct = false,
): Promise<number> {
  const own = distinct ? ` (${session})` : '';
  const clock = {
    t: Date.UTC(2026, 0, 1) + offset * 20_000,
    now() {
      return this.t;
    },
  };
  const writer = new CaptureWriter({
    dir,
    mode: 'full',
    clock,
    rotateBytes: 256 * 1024 * 1024,
    maxQueueBytes: Number.POSITIVE_INFINITY,
    maxQueueMs: Number.POSITIVE_INFINITY,
  });
  const builder = new PrefixBuilder();
  const cache = new AnthropicCache();
  const body: Json & { messages: Json[] } = {
    model: 'claude-opus-5',
    max_tokens: 4096,
    tools: ['Bash', 'Read', 'Edit', 'Write', 'Grep', 'Glob', 'TodoWrite', 'memory'].map((n) =>
      anthropicTool(n),
    ),
    system: [
      {
        type: 'text',
        text: `${session}: you are a careful coding agent. `.repeat(120),
        cache_control: { type: 'ephemeral' },
      },
    ],
    messages: [],
  };
  let last: Json | undefined;
  let raw = 0;
  for (let t = 0; t < N; t++) {
    if (t > 0)
      body.messages.push({
        role: 'assistant',
        content: [{ type: 'text', text: `Done with step ${t}${own}.` }],
      });
    if (last) delete last.cache_control;
    last = {
      type: 'text',
      text: `Step ${t}${own}: run the next check.`,
      cache_control: { type: 'ephemeral' },
    };
    body.messages.push({ role: 'user', content: [last] });
    const bytes = Buffer.from(JSON.stringify(body));
    raw += bytes.length;
    const p0 = performance.now();
    JSON.parse(bytes.toString('utf8'));
    jsonParseMs += performance.now() - p0;
    const prefix = builder.parse(bytes, { format: 'anthropic-messages' });
    clock.t += 20_000;
    const res = cache.evaluate(prefix, session, clock.t, `${session}-r${t}`);
    if (!('usage' in res)) throw new Error(res.message);
    cache.responseBegan(res, clock.t + 400);
    const usage = { ...res.usage, output_tokens: 40 };
    writer.write(benchRecord(session, t, clock.t, bytes.length, capturePrefix(prefix), usage), {
      forwarded: bytes,
    });
    if (t % 20 === 0) await writer.flush();
  }
  await closeWhole(writer, N);
  return raw;
}

/** A hashes-mode session of `turns` requests whose captured blocks are made directly: 8 tools, a system
 * prompt, then a user and an assistant block per turn, the cache marker on the last user block. */
async function generateHashedSession(
  dir: string,
  session: string,
  turns: number,
  offset: number,
): Promise<number> {
  let t = Date.UTC(2026, 0, 1) + offset * 20_000;
  const writer = new CaptureWriter({
    dir,
    mode: 'hashes',
    clock: { now: () => t },
    rotateBytes: 256 * 1024 * 1024,
    // The queue bound (64 MB, counting each record's blocks) would drop records of a long session: flushed
    // only every 500 turns, a 10,000-turn session lost six records in seven. Nothing may be dropped here.
    maxQueueBytes: Number.POSITIVE_INFINITY,
    maxQueueMs: Number.POSITIVE_INFINITY,
  });
  const h = (s: string) => createHash('sha256').update(s).digest('hex');
  const blocks: CapturedBlock[] = [];
  let key = h(`seed:${session}`);
  let at = 40;
  let tokens = 0;
  const push = (b: Omit<CapturedBlock, 'index' | 'hash' | 'at'>) => {
    key = h(`${key}|${b.role ?? ''}|${b.id}`);
    // Cumulative keys are 128 bits (32 hex characters) as the prefix model makes them, not a whole sha256.
    blocks.push({ ...b, index: blocks.length, hash: key.slice(0, 32), at });
    at += b.size + 1;
    tokens += b.tokens;
  };
  for (let i = 0; i < 8; i++)
    push({
      level: 'tools',
      kind: 'tool',
      name: `tool${i}`,
      id: h(`tool${i}`).slice(0, 32),
      size: 1_600,
      tokens: 400,
    });
  push({
    level: 'system',
    kind: 'text',
    id: h(`system:${session}`).slice(0, 32),
    size: 5_000,
    tokens: 1_250,
    cc: { type: 'ephemeral' },
  });
  let raw = 0;
  let lastUser = -1;
  let cached = 0;
  for (let turn = 0; turn < turns; turn++) {
    if (turn > 0)
      push({
        level: 'messages',
        kind: 'text',
        role: 'assistant',
        message: 2 * turn - 1,
        part: 0,
        id: h(`${session}:a${turn}`).slice(0, 32),
        size: 40,
        tokens: 10,
      });
    if (lastUser >= 0) {
      const { cc: _moved, ...rest } = blocks[lastUser] as CapturedBlock;
      blocks[lastUser] = rest;
    }
    push({
      level: 'messages',
      kind: 'text',
      role: 'user',
      message: 2 * turn,
      part: 0,
      id: h(`${session}:u${turn}`).slice(0, 32),
      size: 45,
      tokens: 11,
      cc: { type: 'ephemeral' },
    });
    lastUser = blocks.length - 1;
    t += 20_000;
    raw += at;
    const written = tokens - cached;
    const usage = {
      input_tokens: 3,
      cache_read_input_tokens: cached,
      cache_creation_input_tokens: written,
      output_tokens: 40,
    };
    const record = benchRecord(
      session,
      turn,
      t,
      at,
      {
        format: 'anthropic-messages',
        totalTokens: tokens,
        blocks: CLAUDE_CODE ? claudeCodeOrder(blocks, at) : blocks.slice(),
        params: { tools: {}, system: { model: 'claude-opus-5' }, messages: { max_tokens: 4096 } },
      },
      usage,
    );
    writer.write(record);
    cached = tokens;
    if (turn % 20 === 0) await writer.flush();
  }
  await closeWhole(writer, turns);
  return raw;
}

/**
 * CACHEWARD_BENCH_SHAPE=claude-code: the generated sessions laid out as Claude Code sends them, the messages
 * first and the tools and system prompt after them, so every turn moves the tools' and system's bytes (their
 * blocks are new objects at new offsets; the messages' are the same objects).
 */
const CLAUDE_CODE = process.env.CACHEWARD_BENCH_SHAPE === 'claude-code';

/**
 * Each message block laid out once: a message's offset is the same in every later record (the tools and
 * system before it are of one size), so its laid-out block is the same object, as the proxy's recorder
 * keeps it (a copy per block per record made the 10,000-turn session's generation 2 x 10^8 copies, 146 s).
 */
const laidOut = new WeakMap<CapturedBlock, CapturedBlock>();

/** `blocks` (tools, system, messages in cache order) with the tools and system placed after the messages. */
function claudeCodeOrder(blocks: readonly CapturedBlock[], end: number): CapturedBlock[] {
  const firstMessage = blocks.findIndex((b) => b.level === 'messages');
  const head = firstMessage < 0 ? blocks.length : firstMessage;
  const headStart = (blocks[0] as CapturedBlock).at;
  const messagesStart = head < blocks.length ? (blocks[head] as CapturedBlock).at : end;
  // The messages keep their offsets (moved to where the tools began); the tools and system follow them.
  const shift = end - messagesStart;
  const out = new Array<CapturedBlock>(blocks.length);
  for (let i = 0; i < blocks.length; i++) {
    const b = blocks[i] as CapturedBlock;
    if (i < head) out[i] = { ...b, at: b.at + shift };
    else {
      const at = b.at - (messagesStart - headStart);
      let moved = laidOut.get(b);
      if (moved?.at !== at) {
        moved = { ...b, at };
        laidOut.set(b, moved);
      }
      out[i] = moved;
    }
  }
  return out;
}

/** Closes a bench writer, and fails the bench if it dropped any record (the figures would be of fewer). */
async function closeWhole(writer: CaptureWriter, requests: number): Promise<void> {
  await writer.close();
  const { dropped, written } = writer.state();
  if (dropped > 0 || written !== requests)
    throw new Error(`the capture writer wrote ${written} of ${requests} records (${dropped} dropped)`);
}

/** One answered Opus 5 request of `session` at `turn`, as the proxy records it. */
function benchRecord(
  session: string,
  turn: number,
  start: number,
  requestBytes: number,
  prefix: CaptureRecord['prefix'],
  usage: Record<string, unknown>,
): CaptureRecord {
  return {
    v: 1,
    id: `${session}-r${turn}`,
    times: { start, firstByte: start + 400, end: start + 900 },
    session: { key: session, source: 'header' },
    provider: 'anthropic',
    route: '/v1/messages',
    method: 'POST',
    model: 'claude-opus-5',
    status: 200,
    outcome: 'complete',
    stream: false,
    headers: {},
    betas: [],
    requestBytes,
    fixes: [],
    ...(prefix ? { prefix } : {}),
    usage: { raw: usage, normalized: normalizeAnthropicUsage(usage) },
  };
}

async function measure(label: string, sessions: number, turns: number, hashed = false): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'cacheward-bench-analyze-'));
  try {
    const t0 = performance.now();
    let raw = 0;
    jsonParseMs = 0;
    const requests = sessions * turns;
    if (hashed)
      for (let s = 0; s < sessions; s++)
        raw += await generateHashedSession(dir, `bench-${s}`, turns, s * turns);
    else raw = (await generate(dir, sessions, turns)).raw;
    const size = readdirSync(dir).reduce((a, n) => a + statSync(join(dir, n)).size, 0);
    console.log(
      `\n${label}: ${requests.toLocaleString('en-US')} requests, ${(raw / 1e6).toFixed(0)} MB of request bodies, ${(size / 1e6).toFixed(1)} MB of capture (generated in ${((performance.now() - t0) / 1000).toFixed(0)} s)`,
    );
    // Full-mode captures are made from real bodies: JSON.parse of those same bytes is the baseline.
    const parseRate = jsonParseMs > 0 ? raw / 1e6 / (jsonParseMs / 1000) : undefined;
    if (parseRate)
      console.log(
        `  JSON.parse of the same request bodies: ${parseRate.toFixed(0)} MB/s (${(jsonParseMs / 1000).toFixed(2)} s)`,
      );
    // The analysis runs in its own process so its peak RSS is its own.
    const base = process.env.CACHEWARD_BASE_DIST;
    const runs = Number(process.env.CACHEWARD_BENCH_RUNS ?? (base ? 2 : 1));
    const builds: Array<[string, string | undefined]> = base
      ? [
          ['base', pathToFileURL(base).href],
          ['this', undefined],
        ]
      : [['this', undefined]];
    const extra = process.env.CACHEWARD_BENCH_NODE_ARGS?.split(' ').filter(Boolean) ?? [];
    for (let run = 0; run < runs; run++)
      for (const [name, dist] of run % 2 ? [...builds].reverse() : builds) {
        const args = [...extra, join(import.meta.dirname, 'analyze-child.mjs'), dir, ...(dist ? [dist] : [])];
        const child = spawnSync(process.execPath, args, { encoding: 'utf8' });
        if (child.status !== 0) throw new Error(child.stderr);
        const r = JSON.parse(child.stdout) as {
          ms: number;
          cpuMs: number;
          records: number;
          peakRss: number;
          misses: number;
        };
        const s = r.ms / 1000;
        const rate = raw / 1e6 / s;
        console.log(
          `  analysis${base ? ` (${name})` : ''}: ${(r.records / s).toFixed(0)} requests/s, ${rate.toFixed(0)} MB/s of raw request bytes${parseRate ? ` (${(rate / parseRate).toFixed(2)}x JSON.parse)` : ''}, ${s.toFixed(2)} s (CPU ${(r.cpuMs / 1000).toFixed(2)} s); peak RSS ${(r.peakRss / 1e6).toFixed(0)} MB; ${r.misses} misses`,
        );
      }
  } finally {
    // CACHEWARD_BENCH_KEEP=1 keeps the captures (to profile the child on them).
    if (process.env.CACHEWARD_BENCH_KEEP) console.log(`  kept: ${dir}`);
    else rmSync(dir, { recursive: true, force: true });
  }
}

async function main() {
  console.log(machineLine('analyze'));
  // CACHEWARD_BENCH_ANALYZE=many runs only 100 sessions x 200 turns (many mid-sized conversations: the
  // analysis's weak case); =large only the two large cases.
  if (process.env.CACHEWARD_BENCH_ANALYZE === 'many') {
    await measure(`100 sessions x 200 turns${DISTINCT ? ', each with messages of its own' : ''}`, 100, 200);
    return;
  }
  if (process.env.CACHEWARD_BENCH_ANALYZE !== 'large') {
    await measure('100 sessions x 200 turns', 100, 200);
    await measure('one session of 2,000 turns', 1, 2000);
  }
  await measure('one session of 10,000 turns (hashes mode, generated blocks)', 1, 10_000, true);
  await measure(
    '500 sessions x 200 turns = 100,000 requests (hashes mode, generated blocks)',
    500,
    200,
    true,
  );
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
