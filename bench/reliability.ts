// Benchmark: what a hostile or unlucky day does to the proxy and the CAS store, as real processes on loopback:
// bytes compared end to end, upstream faults, kill -9 and SIGTERM runs, memory bounds, a 30 s kill -9 storm.
// Run: npm run bench:reliability   (builds first; about 90 s). Reuses the test suite's process helpers.
// `npm run bench:reliability -- loop` runs only the large-body event-loop part, `-- kill` only the kill -9 and
// SIGTERM runs, `-- kill-large` only those with 2.5 MB bodies (CACHEWARD_BASE_BIN: a second build run in the
// same run, for a before/after).

import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { readCaptures } from '../src/capture/capture-reader.js';
import { runStorm } from '../test/guard/cas-storm.js';
import { startCliProxy } from '../test/proxy/cli-proxy.js';
import { postHead, RawConnection } from '../test/proxy/raw-http.js';
import { messagesBody } from '../test/sim/helpers.js';
import { loopProbeArgs, machineLine, readLoopProbe, startCli } from './support.js';

const KEY = 'bench-key';
const HEADERS = { 'content-type': 'application/json', 'x-api-key': KEY, 'anthropic-version': '2023-06-01' };
const dirs: string[] = [];
const tmp = (p: string) => {
  const d = mkdtempSync(join(tmpdir(), `cacheward-bench-rel-${p}-`));
  dirs.push(d);
  return d;
};
const sha = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');

async function listen(server: Server): Promise<string> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

/** Every request's bytes as the upstream got them, and every response's bytes as the client got them. */
async function integrity(): Promise<void> {
  const seen = new Map<string, string>();
  const upstream = createServer(async (req, res) => {
    const body = await readBody(req);
    const id = String(req.headers['x-bench-id']);
    seen.set(id, sha(body));
    const reply = JSON.stringify({
      id: `msg_${id}`,
      type: 'message',
      role: 'assistant',
      model: 'claude-opus-5',
      content: [{ type: 'text', text: `echo ${sha(body)}` }],
      stop_reason: 'end_turn',
      usage: { input_tokens: 10, output_tokens: 1 },
    });
    if (req.headers['x-bench-stream']) {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'x-reply-sha': sha(reply) });
      for (let i = 0; i < reply.length; i += 97) res.write(reply.slice(i, i + 97));
      res.end();
    } else {
      res.writeHead(200, { 'content-type': 'application/json', 'x-reply-sha': sha(reply) });
      res.end(reply);
    }
  });
  const url = await listen(upstream);
  const dir = join(tmp('integrity'), 'captures');
  const p = await startCliProxy(['--upstream', url, '--dir', dir, '--capture', 'full']);
  const agent = new Agent({ connections: 16 });
  const sizes = [200, 5_000, 50_000, 400_000];
  let compared = 0;
  let altered = 0;
  let lost = 0;
  const N = 2_000;
  let next = 0;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next < N) {
        const i = next++;
        const body = JSON.stringify(
          messagesBody(2 + (i % 7), (sizes[i % sizes.length] as number) / 4 / (2 + (i % 7))),
        );
        try {
          const res = await request(`${p.url}/v1/messages`, {
            method: 'POST',
            dispatcher: agent,
            headers: { ...HEADERS, 'x-bench-id': String(i), ...(i % 2 ? { 'x-bench-stream': '1' } : {}) },
            body,
          });
          const got = Buffer.from(await res.body.arrayBuffer());
          compared++;
          if (seen.get(String(i)) !== sha(body) || res.headers['x-reply-sha'] !== sha(got)) altered++;
        } catch {
          lost++;
        }
      }
    }),
  );
  await new Promise((r) => setTimeout(r, 500));
  p.child.kill('SIGTERM');
  await p.exited;
  let recorded = 0;
  let bodiesExact = 0;
  for await (const r of readCaptures([dir])) {
    recorded++;
    if (r.body && r.body.length === r.record.requestBytes) bodiesExact++;
  }
  const captureText = readdirSync(dir)
    .map((n) => readFileSync(join(dir, n), 'utf8'))
    .join('');
  console.log(
    `\nintegrity: ${compared} requests (200 B to 400 KB, half streamed) through the proxy, request and response bytes compared by sha256: ${altered} altered, ${lost} lost; ${recorded} captured, ${bodiesExact} bodies rebuilt byte-exactly; API key in captures: ${captureText.includes(KEY) ? 'YES' : 'no'}`,
  );
  await agent.close();
  upstream.close();
}

async function faults(simUrl: string): Promise<void> {
  console.log('\nfaults:');
  // A client that writes its whole 16 MB body before reading, to an upstream that cannot be reached.
  const down = await startCliProxy(['--upstream', 'http://127.0.0.1:9', '--dir', join(tmp('down'), 'c')]);
  let answered = 0;
  let reused = 0;
  const big = Buffer.alloc(16 * 1024 * 1024, 0x20);
  const times: number[] = [];
  for (let i = 0; i < 10; i++) {
    const conn = await RawConnection.open(down.url);
    const t0 = performance.now();
    await conn.writeWhole(postHead('/v1/messages', new URL(down.url).host, big.length), big);
    const r = await conn.readResponse(10_000);
    times.push(performance.now() - t0);
    if (r.status === 502) answered++;
    await conn.writeWhole(`GET /_cacheward/health HTTP/1.1\r\nhost: ${new URL(down.url).host}\r\n\r\n`);
    if ((await conn.readResponse(5_000).catch(() => undefined))?.status === 200) reused++;
    conn.close();
  }
  console.log(
    `- whole-body-first client, 16 MB, unreachable upstream: ${answered}/10 answered 502 (max ${Math.max(...times).toFixed(0)} ms), ${reused}/10 keep-alive connections reused`,
  );
  down.child.kill('SIGTERM');
  // An upstream that answers 413 before reading the body, and closes.
  const early = createServer((_req, res) => {
    res.writeHead(413, { 'content-type': 'application/json', connection: 'close' });
    res.end('{"type":"error","error":{"type":"request_too_large","message":"too large"}}');
  });
  const earlyUrl = await listen(early);
  const p413 = await startCliProxy(['--upstream', earlyUrl, '--dir', join(tmp('413'), 'c')]);
  const counts = new Map<number, number>();
  const payload = Buffer.alloc(4 * 1024 * 1024, 0x20);
  for (let i = 0; i < 100; i++) {
    const res = await fetch(`${p413.url}/v1/messages`, { method: 'POST', headers: HEADERS, body: payload });
    await res.arrayBuffer();
    counts.set(res.status, (counts.get(res.status) ?? 0) + 1);
  }
  console.log(
    `- upstream answers 413 early to a 4 MB upload, 100 trials: ${[...counts].map(([s, n]) => `${n} × ${s}`).join(', ')}`,
  );
  p413.child.kill('SIGTERM');
  early.close();
  // Expect: 100-continue, absolute-form and a foreign Host.
  const p = await startCliProxy(['--upstream', simUrl, '--dir', join(tmp('edges'), 'c')]);
  const host = new URL(p.url).host;
  const body = Buffer.from(JSON.stringify(messagesBody(3, 200)));
  let continued = 0;
  for (let i = 0; i < 20; i++) {
    const conn = await RawConnection.open(p.url);
    await conn.writeWhole(postHead('/v1/messages', host, body.length, { expect: '100-continue' }));
    if ((await conn.readResponse()).status === 100) {
      await conn.writeWhole('', body);
      if ((await conn.readResponse()).status === 200) continued++;
    }
    conn.close();
  }
  const refusals: string[] = [];
  for (const [label, head] of [
    ['absolute-form', postHead('http://elsewhere.example/v1/messages', host, body.length)],
    ['Host rebind.example', postHead('/v1/messages', 'rebind.example', body.length)],
  ] as const) {
    const conn = await RawConnection.open(p.url);
    await conn.writeWhole(head, body);
    refusals.push(`${label} → ${(await conn.readResponse()).status}`);
    conn.close();
  }
  const metrics = await (await fetch(`${p.url}/_cacheward/metrics`)).text();
  const upstreamErrors = metrics
    .split('\n')
    .filter((l) => l.startsWith('cacheward_upstream_errors_total{')).length;
  console.log(
    `- Expect: 100-continue: ${continued}/20 answered 100 then 200; ${refusals.join(', ')}; upstream error series after them: ${upstreamErrors}`,
  );
  p.child.kill('SIGTERM');
}

async function ids(dir: string): Promise<Set<string>> {
  const out = new Set<string>();
  for await (const r of readCaptures([dir], { onWarning: () => {} }))
    if (r.record.responseId) out.add(r.record.responseId);
  return out;
}

async function killRuns(simUrl: string): Promise<void> {
  console.log('\nkill runs (capture full):');
  const lostAges: number[] = [];
  let ackedTotal = 0;
  let lostTotal = 0;
  for (let run = 0; run < 5; run++) {
    const dir = join(tmp('kill'), 'c');
    const p = await startCliProxy(['--upstream', simUrl, '--dir', dir, '--capture', 'full']);
    const acked: Array<{ id: string; at: number }> = [];
    let killedAt = 0;
    const agent = new Agent({ connections: 8 });
    let n = 0;
    const load = Promise.all(
      Array.from({ length: 8 }, async (_, w) => {
        while (!killedAt) {
          try {
            const res = await request(`${p.url}/v1/messages`, {
              method: 'POST',
              dispatcher: agent,
              headers: HEADERS,
              body: JSON.stringify(messagesBody(4 + (n++ % 20), 400 + w)),
            });
            const json = (await res.body.json()) as { id: string };
            acked.push({ id: json.id, at: Date.now() });
          } catch {
            return;
          }
        }
      }),
    );
    await new Promise((r) => setTimeout(r, 2_000 + run * 300));
    p.child.kill('SIGKILL');
    killedAt = Date.now();
    await load;
    await p.exited;
    await agent.close();
    const got = await ids(dir);
    const before = acked.filter((a) => a.at <= killedAt);
    ackedTotal += before.length;
    for (const a of before)
      if (!got.has(a.id)) {
        lostTotal++;
        lostAges.push(killedAt - a.at);
      }
  }
  console.log(
    `- kill -9 under steady load (8 clients, 5 runs): ${ackedTotal} exchanges acknowledged before the kill, ${lostTotal} not on disk, all acknowledged within the last ${Math.max(0, ...lostAges)} ms`,
  );
  // A burst: 250 answers released at the same instant, then kill -9 some time after the last one arrived.
  for (const wait of [0, 100, 250, 500, 1000]) {
    const held: Array<() => void> = [];
    let seq = 0;
    const upstream = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        const id = `msg_burst_${++seq}`;
        held.push(() => {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(
            JSON.stringify({
              id,
              type: 'message',
              content: [],
              usage: { input_tokens: 1, output_tokens: 1 },
            }),
          );
        });
        if (held.length === 250) for (const h of held.splice(0)) h();
      });
    });
    const dir = join(tmp('burst'), 'c');
    const p = await startCliProxy(['--upstream', await listen(upstream), '--dir', dir, '--capture', 'full']);
    const agent = new Agent({ connections: 250 });
    const sent = await Promise.all(
      Array.from({ length: 250 }, async (_, i) => {
        const res = await request(`${p.url}/v1/messages`, {
          method: 'POST',
          dispatcher: agent,
          headers: HEADERS,
          body: JSON.stringify(messagesBody(4 + (i % 30), 500 + i)),
        });
        return ((await res.body.json()) as { id: string }).id;
      }),
    );
    await new Promise((r) => setTimeout(r, wait));
    p.child.kill('SIGKILL');
    await p.exited;
    const got = await ids(dir);
    console.log(
      `- burst of 250 exchanges (~40 KB each) ending together, kill -9 ${wait} ms after the last answer: ${sent.filter((id) => !got.has(id)).length} not on disk`,
    );
    await agent.close();
    upstream.closeAllConnections();
    upstream.close();
  }
  // SIGTERM under load.
  const dir = join(tmp('term'), 'c');
  const p = await startCliProxy(['--upstream', simUrl, '--dir', dir, '--capture', 'full']);
  const acked: string[] = [];
  let stop = false;
  const agent = new Agent({ connections: 8 });
  const load = Promise.all(
    Array.from({ length: 8 }, async (_, w) => {
      while (!stop) {
        try {
          const res = await request(`${p.url}/v1/messages`, {
            method: 'POST',
            dispatcher: agent,
            headers: HEADERS,
            body: JSON.stringify(messagesBody(5, 400 + w)),
          });
          acked.push(((await res.body.json()) as { id: string }).id);
        } catch {
          return;
        }
      }
    }),
  );
  await new Promise((r) => setTimeout(r, 2_000));
  const t0 = performance.now();
  p.child.kill('SIGTERM');
  stop = true;
  await p.exited;
  const exitMs = performance.now() - t0;
  await load;
  await agent.close();
  const got = await ids(dir);
  console.log(
    `- SIGTERM under load: ${acked.length} acknowledged, ${acked.filter((id) => !got.has(id)).length} not on disk, exited in ${exitMs.toFixed(0)} ms`,
  );
}

/**
 * kill -9 with 2.5 MB bodies in flight: 8 clients, distinct random bodies, the kill 3-4 s in, alternating
 * this build and CACHEWARD_BASE_BIN. Per build: exchanges acknowledged before the kill, their records on
 * disk (with and without the body), those said not captured, and how long before the kill the lost ones
 * were acknowledged.
 */
async function killLarge(): Promise<void> {
  const { url, server } = await answeringUpstream();
  const builds: Array<[string, string | undefined]> = [['this build', undefined]];
  if (process.env.CACHEWARD_BASE_BIN) builds.push(['base build', process.env.CACHEWARD_BASE_BIN]);
  const bytes = 2_500_000;
  const texts = Array.from({ length: 9 }, (_, i) => `${i} ${randomBytes(bytes * 0.75).toString('base64')}`);
  const totals = new Map<
    string,
    { acked: number; bodies: number; lean: number; said: number; lost: number[] }
  >();
  console.log('\nkill -9 with 2.5 MB bodies in flight (capture full, 8 clients, 3 runs per build):');
  for (let run = 0; run < 3; run++)
    for (const [label, bin] of builds) {
      const t = totals.get(label) ?? { acked: 0, bodies: 0, lean: 0, said: 0, lost: [] };
      totals.set(label, t);
      const dir = join(tmp('kill-large'), 'c');
      const p = await startCli(
        ['proxy', '--port', '0', '--upstream', url, '--dir', dir, '--capture', 'full', '--no-warm-up'],
        bin ? { bin } : {},
      );
      const exited = new Promise((r) => p.child.once('exit', r));
      const acked: Array<{ id: string; at: number }> = [];
      let killedAt = 0;
      let n = 0;
      const agent = new Agent({ connections: 8 });
      const load = Promise.all(
        Array.from({ length: 8 }, async (_, w) => {
          while (!killedAt) {
            const body = JSON.stringify({
              model: 'claude-opus-5',
              max_tokens: 8,
              messages: [{ role: 'user', content: `${n++} ${texts[n % texts.length]}` }],
            });
            try {
              const res = await request(`${p.url}/v1/messages`, {
                method: 'POST',
                dispatcher: agent,
                headers: { ...HEADERS, 'x-cacheward-session': `w${w}` },
                body,
              });
              const json = (await res.body.json()) as { id: string };
              acked.push({ id: json.id, at: Date.now() });
            } catch {
              return;
            }
          }
        }),
      );
      await new Promise((r) => setTimeout(r, 3_000 + run * 500));
      p.child.kill('SIGKILL');
      killedAt = Date.now();
      await load;
      await exited;
      await agent.close();
      const got = new Map<string, boolean>();
      for await (const r of readCaptures([dir], {
        onWarning: () => {},
        onNotCaptured: (m) => {
          t.said += m.exchanges;
        },
      }))
        if (r.record.responseId) got.set(r.record.responseId, r.body !== undefined);
      for (const a of acked.filter((x) => x.at <= killedAt)) {
        t.acked++;
        const body = got.get(a.id);
        if (body === true) t.bodies++;
        else if (body === false) t.lean++;
        else t.lost.push(killedAt - a.at);
      }
    }
  for (const [label, t] of totals) {
    const lost = t.lost.sort((a, b) => a - b);
    console.log(
      `- ${label}: ${t.acked} acknowledged before the kill; on disk ${t.bodies} with their body, ${t.lean} without; ${t.said} said not captured; ${lost.length} not on disk${lost.length ? `, acknowledged ${lost[0]}–${lost.at(-1)} ms before the kill (median ${lost[lost.length >> 1]} ms)` : ''}`,
    );
  }
  server.close();
}

/** An upstream that reads any body and answers a small message, so bodies of any size get a 200. */
async function answeringUpstream(): Promise<{ url: string; server: Server }> {
  const server = createServer(async (req, res) => {
    // A proxy killed mid-request aborts the body: nothing to answer.
    const body = await readBody(req).catch(() => undefined);
    if (!body) return;
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        id: `msg_${sha(body).slice(0, 12)}`,
        type: 'message',
        role: 'assistant',
        content: [],
        usage: { input_tokens: 1, output_tokens: 1 },
      }),
    );
  });
  return { url: await listen(server), server };
}

async function memory(simUrl: string): Promise<void> {
  console.log('\nmemory and disk bounds:');
  const rssOf = (pid: number) =>
    Number(readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmRSS:\s+(\d+) kB/)?.[1]) / 1024;
  const up = await answeringUpstream();
  const p = await startCliProxy(['--upstream', up.url, '--dir', join(tmp('rss'), 'c'), '--capture', 'full']);
  const pid = p.child.pid as number;
  const post = async (body: string) => {
    const res = await fetch(`${p.url}/v1/messages`, { method: 'POST', headers: HEADERS, body });
    await res.arrayBuffer();
    return res.status;
  };
  for (let i = 0; i < 5; i++) await post(JSON.stringify(messagesBody(6, 400)));
  const before = rssOf(pid);
  const status = await post(JSON.stringify(messagesBody(2, 5 * 1024 * 1024)));
  const peak = rssOf(pid);
  const samples: string[] = [];
  let waited = 0;
  for (const at of [2, 10, 30]) {
    await new Promise((r) => setTimeout(r, (at - waited) * 1000));
    waited = at;
    samples.push(`${rssOf(pid).toFixed(0)} MB after ${at} s`);
  }
  console.log(
    `- a 40 MB body (status ${status}): RSS ${before.toFixed(0)} MB before, ${peak.toFixed(0)} MB just after, ${samples.join(', ')}`,
  );
  // Metrics with 5,000 model names.
  const before2 = rssOf(pid);
  const agent = new Agent({ connections: 16 });
  let m = 0;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (m < 5_000) {
        const i = m++;
        const res = await request(`${p.url}/v1/messages`, {
          method: 'POST',
          dispatcher: agent,
          headers: HEADERS,
          body: JSON.stringify({
            model: `claude-fake-${i}`,
            max_tokens: 1,
            messages: [{ role: 'user', content: 'hi' }],
          }),
        });
        await res.body.arrayBuffer();
      }
    }),
  );
  await agent.close();
  const text = await (await fetch(`${p.url}/_cacheward/metrics`)).text();
  console.log(
    `- 5,000 model names: /_cacheward/metrics is ${(Buffer.byteLength(text) / 1024).toFixed(1)} KB with ${text.split('\n').filter((l) => l.startsWith('cacheward_requests_total{')).length} request series; RSS ${before2.toFixed(0)} → ${rssOf(pid).toFixed(0)} MB`,
  );
  p.child.kill('SIGTERM');
  await p.exited;
  up.server.close();
  // --max-mb 2 under full capture of distinct sessions.
  const dir = join(tmp('maxmb'), 'c');
  const q = await startCliProxy(['--upstream', simUrl, '--dir', dir, '--capture', 'full', '--max-mb', '2']);
  let peakBytes = 0;
  let raw = 0;
  for (let i = 0; i < 600; i++) {
    const body = JSON.stringify(messagesBody(4, 2_500 + i));
    raw += body.length;
    const res = await fetch(`${q.url}/v1/messages`, {
      method: 'POST',
      headers: { ...HEADERS, 'x-cacheward-session': `s${i}` },
      body,
    });
    await res.arrayBuffer();
    if (i % 25 === 24) {
      await new Promise((r) => setTimeout(r, 50));
      const bytes = readdirSync(dir)
        .filter((n) => n.startsWith('capture-'))
        .reduce((a, n) => a + statSync(join(dir, n)).size, 0);
      peakBytes = Math.max(peakBytes, bytes);
    }
  }
  q.child.kill('SIGTERM');
  await q.exited;
  console.log(
    `- --max-mb 2, 600 full-mode requests in distinct sessions (${(raw / 1024 / 1024).toFixed(1)} MB of bodies): the folder peaked at ${(peakBytes / 1024 / 1024).toFixed(2)} MB`,
  );
}

/** A huge agent-shaped request: tools, a system prompt and `n` short messages (about 86 bytes each). */
function hugeBody(n: number, extra: Array<Record<string, unknown>> = []): Record<string, unknown> {
  const words = ['alpha', 'bravo', 'charlie', 'delta', 'echo', 'foxtrot', 'golf', 'hotel'];
  const messages: Array<Record<string, unknown>> = [];
  for (let i = 0; i < n; i++)
    messages.push({
      role: i % 2 ? 'assistant' : 'user',
      content: [
        { type: 'text', text: `[${i}] ${words[i % 8]} ${words[(i * 3) % 8]} ${words[(i * 5) % 8]} turn` },
      ],
    });
  messages.push(...extra);
  const tools = ['Read', 'Write', 'Bash'].map((name) => ({
    name,
    description: `The ${name} tool.`,
    input_schema: { type: 'object', properties: { arg: { type: 'string' } } },
  }));
  return { model: 'claude-opus-5', max_tokens: 64, system: 'You are a coding agent.', tools, messages };
}

/**
 * A 100,000-message request (two turns) through the built proxy while another client streams through it:
 * the proxy's longest event-loop hold (bench/loop-probe.mjs), the other client's longest gap between
 * chunks, and the proxy's own longest after-response step, with and without fixes.
 */
async function loop(): Promise<void> {
  const N = Number(process.env.CACHEWARD_BENCH_LOOP_MESSAGES ?? 100_000);
  // The upstream: a big request gets a short JSON answer; the other client's request a stream of one
  // small event every 5 ms until it has run `x-bench-ms`.
  const upstream = createServer(async (req, res) => {
    const body = await readBody(req);
    const ms = Number(req.headers['x-bench-ms'] ?? 0);
    if (ms) {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const t0 = performance.now();
      const tick = setInterval(() => {
        res.write(`event: ping\ndata: {"type":"ping","at":${(performance.now() - t0).toFixed(0)}}\n\n`);
        if (performance.now() - t0 > ms) {
          clearInterval(tick);
          res.end();
        }
      }, 5);
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        id: `msg_${sha(body).slice(0, 12)}`,
        type: 'message',
        role: 'assistant',
        model: 'claude-opus-5',
        content: [{ type: 'text', text: 'done' }],
        stop_reason: 'end_turn',
        usage: { input_tokens: 10, output_tokens: 1 },
      }),
    );
  });
  const url = await listen(upstream);
  const builds: Array<[string, string | undefined]> = [['this build', undefined]];
  if (process.env.CACHEWARD_BASE_BIN) builds.push(['base build', process.env.CACHEWARD_BASE_BIN]);
  console.log(
    `\nevent loop: a ${N.toLocaleString('en-US')}-message request, then the next turn (+2 messages), while another client streams (an event every 5 ms):`,
  );
  for (const fix of [undefined, 'tools-freeze,pin-reminders'])
    for (const [label, bin] of builds) {
      const probe = join(tmp('loop'), 'probe.json');
      const args = ['proxy', '--port', '0', '--upstream', url, '--dir', join(tmp('loop'), 'c')];
      if (fix) args.push('--fix', fix);
      const p = await startCli(args, { ...loopProbeArgs(probe), ...(bin ? { bin } : {}) });
      const headers = { ...HEADERS, 'x-cacheward-session': 'huge' };
      const turns: string[] = [];
      let extra: Array<Record<string, unknown>> = [];
      for (let turn = 1; turn <= 2; turn++) {
        const body = JSON.stringify(hugeBody(N, extra));
        // The other client's stream: the longest gap between two chunks it received.
        let stall = 0;
        let done = false;
        const streaming = (async () => {
          const res = await request(`${p.url}/v1/messages`, {
            method: 'POST',
            headers: { ...HEADERS, 'x-bench-ms': '20000', 'x-cacheward-session': 'other' },
            body: JSON.stringify({
              model: 'claude-opus-5',
              max_tokens: 8,
              stream: true,
              messages: [{ role: 'user', content: 'hi' }],
            }),
          });
          let last = performance.now();
          for await (const _ of res.body) {
            const now = performance.now();
            stall = Math.max(stall, now - last);
            last = now;
            if (done) break;
          }
          res.body.destroy();
        })();
        await new Promise((r) => setTimeout(r, 300));
        await readLoopProbe(p.child, probe);
        stall = 0;
        const t0 = performance.now();
        const res = await request(`${p.url}/v1/messages`, { method: 'POST', headers, body });
        await res.body.arrayBuffer();
        const took = performance.now() - t0;
        // Until the after-response work is done: no step pending, then a little more.
        for (let i = 0; i < 600; i++) {
          const m = await (await fetch(`${p.url}/_cacheward/metrics`)).text();
          if (
            /cacheward_after_response_pending 0\b/.test(m) ||
            !m.includes('cacheward_after_response_pending')
          )
            break;
          await new Promise((r) => setTimeout(r, 50));
        }
        await new Promise((r) => setTimeout(r, 300));
        const held = await readLoopProbe(p.child, probe);
        done = true;
        await streaming.catch(() => {});
        turns.push(
          `turn ${turn} (${(Buffer.byteLength(body) / 1024 / 1024).toFixed(1)} MB): answered in ${took.toFixed(0)} ms, loop held at most ${held.max.toFixed(0)} ms, other client's longest stall ${stall.toFixed(0)} ms`,
        );
        extra = [
          ...extra,
          { role: 'assistant', content: [{ type: 'text', text: 'done' }] },
          { role: 'user', content: [{ type: 'text', text: `next ${turn}` }] },
        ];
      }
      const m = await (await fetch(`${p.url}/_cacheward/metrics`)).text();
      const step = Number(m.match(/cacheward_after_response_step_max_seconds ([\d.]+)/)?.[1] ?? Number.NaN);
      const slice = Number(m.match(/cacheward_after_response_slice_max_seconds ([\d.]+)/)?.[1] ?? Number.NaN);
      console.log(
        `- ${fix ? `--fix ${fix}` : 'no fixes'}, ${label}: ${turns.join('; ')}; longest after-response step ${(step * 1000).toFixed(1)} ms, slice ${(slice * 1000).toFixed(1)} ms`,
      );
      p.child.kill('SIGTERM');
      await new Promise((r) => p.child.once('exit', r));
    }
  upstream.close();
}

async function storm(): Promise<void> {
  const r = await runStorm({
    dir: join(tmp('storm'), 'store'),
    appenders: 10,
    batchers: 2,
    durationMs: 30_000,
    killEveryMs: 100,
  });
  console.log(
    `\nCAS store kill -9 storm (12 writer processes, one killed every ~100 ms for 30 s, the lock holder when there is one): ${r.kills} kills (${r.holderKills} of the lock holder), ${r.acknowledged} acknowledged appends, ${r.lost.length} lost, ${r.duplicated} duplicated; ${r.acquisitions} probe acquisitions, ${r.overlaps} overlapping; ${r.reads} two-document reads, ${r.halfReads} half a batch`,
  );
}

async function main() {
  console.log(machineLine('reliability'));
  if (process.argv.includes('kill-large') || process.argv.includes('kill')) {
    const sim = process.argv.includes('kill')
      ? await startCli(['sim', '--port', '0', '--no-auth'])
      : undefined;
    try {
      if (sim) await killRuns(sim.url);
      await killLarge();
    } finally {
      sim?.child.kill();
      for (const d of dirs) rmSync(d, { recursive: true, force: true });
    }
    return;
  }
  if (process.argv.includes('loop')) {
    try {
      await loop();
    } finally {
      for (const d of dirs) rmSync(d, { recursive: true, force: true });
    }
    return;
  }
  const sim = await startCli(['sim', '--port', '0', '--no-auth']);
  try {
    await integrity();
    await faults(sim.url);
    await killRuns(sim.url);
    await killLarge();
    await memory(sim.url);
    await storm();
    await loop();
  } finally {
    sim.child.kill();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  }
}

await main();
