// Benchmark: `cacheward report`'s analysis over generated full-mode captures of growing conversations (each
// request one short turn longer): 10,000 requests as 50 sessions x 200 turns, and one 2,000-turn session.
// Requests/s, raw request MB/s, peak RSS. Run: npm run bench:analyze   (builds; about 90 s)

import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AnthropicCache, normalizeAnthropicUsage, PrefixBuilder } from '../dist/index.js';
import { CaptureWriter } from '../dist/proxy/index.js';
import { capturePrefix } from '../src/capture/capture-record.js';
import { anthropicTool } from '../src/demo/agent-conversation.js';
import { type Json, machineLine } from './support.js';

async function generate(
  dir: string,
  sessions: number,
  turns: number,
): Promise<{ raw: number; requests: number }> {
  let raw = 0;
  for (let s = 0; s < sessions; s++) raw += await generateSession(dir, `bench-${s}`, turns, s * turns);
  return { raw, requests: sessions * turns };
}

async function generateSession(dir: string, session: string, N: number, offset: number): Promise<number> {
  const clock = {
    t: Date.UTC(2026, 0, 1) + offset * 20_000,
    now() {
      return this.t;
    },
  };
  const writer = new CaptureWriter({ dir, mode: 'full', clock, rotateBytes: 256 * 1024 * 1024 });
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
      body.messages.push({ role: 'assistant', content: [{ type: 'text', text: `Done with step ${t}.` }] });
    if (last) delete last.cache_control;
    last = { type: 'text', text: `Step ${t}: run the next check.`, cache_control: { type: 'ephemeral' } };
    body.messages.push({ role: 'user', content: [last] });
    const bytes = Buffer.from(JSON.stringify(body));
    raw += bytes.length;
    const prefix = builder.parse(bytes, { format: 'anthropic-messages' });
    clock.t += 20_000;
    const res = cache.evaluate(prefix, session, clock.t, `${session}-r${t}`);
    if (!('usage' in res)) throw new Error(res.message);
    cache.responseBegan(res, clock.t + 400);
    const usage = { ...res.usage, output_tokens: 40 };
    writer.write(
      {
        v: 1,
        id: `${session}-r${t}`,
        times: { start: clock.t, firstByte: clock.t + 400, end: clock.t + 900 },
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
        requestBytes: bytes.length,
        fixes: [],
        prefix: capturePrefix(prefix),
        usage: { raw: usage, normalized: normalizeAnthropicUsage(usage) },
      },
      { forwarded: bytes },
    );
    if (t % 500 === 0) await writer.flush();
  }
  await writer.close();
  return raw;
}

async function measure(label: string, sessions: number, turns: number): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'cacheward-bench-analyze-'));
  try {
    const t0 = performance.now();
    const { raw, requests } = await generate(dir, sessions, turns);
    const size = readdirSync(dir).reduce((a, n) => a + statSync(join(dir, n)).size, 0);
    console.log(
      `\n${label}: ${requests.toLocaleString('en-US')} requests, ${(raw / 1e6).toFixed(0)} MB of request bodies, ${(size / 1e6).toFixed(1)} MB of full-mode capture (generated in ${((performance.now() - t0) / 1000).toFixed(0)} s)`,
    );
    // The analysis runs in its own process so its peak RSS is its own.
    const child = spawnSync(process.execPath, [join(import.meta.dirname, 'analyze-child.mjs'), dir], {
      encoding: 'utf8',
    });
    if (child.status !== 0) throw new Error(child.stderr);
    const r = JSON.parse(child.stdout) as { ms: number; records: number; peakRss: number; misses: number };
    const s = r.ms / 1000;
    console.log(
      `  analysis: ${(r.records / s).toFixed(0)} requests/s, ${(raw / 1e6 / s).toFixed(0)} MB/s of raw request bytes, ${s.toFixed(2)} s; peak RSS ${(r.peakRss / 1e6).toFixed(0)} MB`,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main() {
  console.log(machineLine('analyze'));
  await measure('50 sessions x 200 turns', 50, 200);
  await measure('one session of 2,000 turns', 1, 2000);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
