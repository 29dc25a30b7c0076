import { spawn } from 'node:child_process';
import {
  closeSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  statSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { PriceTable } from '../../src/analyze/price-table.js';
import { readCaptures } from '../../src/capture/capture-reader.js';
import { VirtualClock } from '../../src/core/clock.js';
import { NotListeningError } from '../../src/core/listen.js';
import { createProxy, ProxyConfigError } from '../../src/proxy/create-proxy.js';
import { analyzePaths } from '../../src/report/analyze-paths.js';
import { renderTerminalReport } from '../../src/report/terminal-report.js';
import { createSimulator } from '../../src/sim/simulator.js';
import { EPHEMERAL, messagesBody } from '../sim/helpers.js';
import { builtCli } from '../suite.js';
import { API_KEY, nextLiveRequest, startProxy } from './helpers.js';

type Json = Record<string, unknown>;
const h = await startProxy();
const same = (t: string) => t;
const plain = { bold: same, dim: same, yellow: same, green: same };
const body = messagesBody(3, 200, { 2: EPHEMERAL });
const fault = (f: string) => ({ headers: { 'x-sim-fault': f } });
const caught = (p: Promise<unknown>) =>
  p.then(
    () => undefined,
    (e: unknown) => e,
  );

describe('upstream faults reach the client as the provider sent them', () => {
  it('passes 429 (with retry-after), 500 and 529 through without retrying', async () => {
    const before = h.sim.stats().requests;
    const e429 = (await caught(h.anthropic().messages.create(body as never, fault('429')))) as InstanceType<
      typeof Anthropic.APIError
    >;
    expect(e429).toBeInstanceOf(Anthropic.RateLimitError);
    expect(e429.headers?.get('retry-after')).toBe('1');
    expect(
      ((await caught(h.anthropic().messages.create(body as never, fault('500')))) as { status: number })
        .status,
    ).toBe(500);
    expect(
      ((await caught(h.anthropic().messages.create(body as never, fault('529')))) as { status: number })
        .status,
    ).toBe(529);
    expect(
      (
        (await caught(
          h
            .openai()
            .chat.completions.create(
              { model: 'gpt-5.4', messages: [{ role: 'user', content: 'x' }] },
              fault('529'),
            ),
        )) as { status: number }
      ).status,
    ).toBe(503);
    expect(h.sim.stats().requests - before).toBe(4);
    const recs = await h.records();
    expect(recs.filter((r) => r.record.status === 429).at(-1)?.record.outcome).toBe('error');
  });

  it('passes an SSE error event through mid-stream', async () => {
    const err = await caught(
      h
        .anthropic()
        .messages.stream(body as never, fault('error-mid-stream'))
        .finalMessage(),
    );
    expect(err).toBeInstanceOf(Anthropic.APIError);
    const chat = await h
      .openai()
      .chat.completions.create(
        { model: 'gpt-5.4', stream: true, messages: [{ role: 'user', content: 'hello there' }] },
        fault('error-mid-stream'),
      );
    expect(
      await caught(
        (async () => {
          for await (const _ of chat) {
            /* read */
          }
        })(),
      ),
    ).toBeInstanceOf(OpenAI.APIError);
  });

  it('records a Responses stream that ended in an error event as cut short, and the report counts it', async () => {
    const stream = await h
      .openai()
      .responses.create(
        { model: 'gpt-5.5', stream: true, input: 'hello there', prompt_cache_key: 'sse-error' },
        fault('error-mid-stream'),
      );
    // The SDK hands the error event on as an event (the stream then ends).
    const types: string[] = [];
    for await (const e of stream) types.push(e.type);
    expect(types.at(-1)).toBe('error');
    expect(types).not.toContain('response.completed');
    await h.proxy.flush();
    const rec = (await h.records()).find((r) => r.record.session.key === 'pck:sse-error')?.record;
    expect(rec?.status).toBe(200);
    expect(rec?.error).toMatch(/The server had an error/);
    expect(rec?.outcome).toBe('upstream_error');
    const a = await analyzePaths([h.dir], { prices: new PriceTable() });
    expect(a.totals.unanswered?.upstream_error).toBeGreaterThanOrEqual(1);
  });

  it('resets the client when the upstream resets mid-stream, and records it', async () => {
    const err = await caught(
      h
        .anthropic()
        .messages.stream(body as never, fault('reset-mid-stream'))
        .finalMessage(),
    );
    expect(err).toBeInstanceOf(Anthropic.AnthropicError);
    expect(err).not.toBeInstanceOf(Anthropic.APIError);
    const rec = (await h.records()).filter((r) => r.record.outcome === 'upstream_reset').at(-1);
    expect(rec?.record.error).toMatch(/dropped mid-response/);
    expect(rec?.record.status).toBe(200);
  });

  it('the report says how many requests got no whole answer, by how each ended', async () => {
    const reset = await caught(
      h
        .anthropic()
        .messages.stream(body as never, fault('reset-mid-stream'))
        .finalMessage(),
    );
    expect(reset).toBeInstanceOf(Anthropic.AnthropicError);
    // A client that gives up on a stalled answer.
    const client = new Anthropic({ apiKey: API_KEY, baseURL: h.proxy.url, maxRetries: 0, timeout: 150 });
    const named = nextLiveRequest(h.proxy);
    expect(await caught(client.messages.create(body as never, fault('stall=1500')))).toBeInstanceOf(
      Anthropic.APIConnectionTimeoutError,
    );
    await named;
    await h.proxy.flush();
    const recs = await h.records();
    const told: Record<string, number> = {};
    for (const { record } of recs)
      if (['client_aborted', 'upstream_reset', 'upstream_error'].includes(record.outcome))
        told[record.outcome] = (told[record.outcome] ?? 0) + 1;
    expect(told.client_aborted).toBeGreaterThanOrEqual(1);
    expect(told.upstream_reset).toBeGreaterThanOrEqual(1);
    const a = await analyzePaths([h.dir], { prices: new PriceTable() });
    expect(a.totals.unanswered).toEqual(told);
    const line = renderTerminalReport(a, plain).find((l) => l.includes('no whole answer'));
    expect(line).toContain(`upstream_reset ${told.upstream_reset}`);
    expect(line).toContain(`client_aborted ${told.client_aborted}`);
  });

  it('answers 502 in the provider shape when the upstream cannot be reached', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cacheward-down-'));
    const down = createProxy({ upstream: 'http://127.0.0.1:9', dir, logger: {} });
    await down.listen();
    try {
      const res = await fetch(`${down.url}/v1/messages`, {
        method: 'POST',
        headers: { 'x-api-key': 'k' },
        body: JSON.stringify(body),
      });
      expect(res.status).toBe(502);
      const json = (await res.json()) as Json;
      expect(json.type).toBe('error');
      expect((json.error as Json).message as string).toMatch(
        /could not reach the upstream http:\/\/127\.0\.0\.1:9/,
      );
      expect(down.metrics()).toMatch(/cacheward_upstream_errors_total\{provider="anthropic"\} 1/);
    } finally {
      await down.close();
    }
  });
});

describe('clients that go away', () => {
  /**
   * Runs `client` against a proxy in front of `upstream`: the upstream's connection must then close
   * (`closed`), and the exchange be recorded as client_aborted.
   */
  async function expectAbortRecorded(
    upstream: Server,
    closed: Promise<void>,
    client: (url: string) => Promise<void>,
  ): Promise<void> {
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', () => r()));
    const port = (upstream.address() as AddressInfo).port;
    const dir = mkdtempSync(join(tmpdir(), 'cacheward-abort-'));
    const p = createProxy({ upstream: `http://127.0.0.1:${port}`, dir, logger: {} });
    await p.listen();
    try {
      await client(p.url);
      await closed;
      await p.flush();
      const recs = [];
      for await (const r of readCaptures([dir])) recs.push(r);
      expect(recs[0]?.record.outcome).toBe('client_aborted');
    } finally {
      await p.close();
      upstream.closeAllConnections();
      upstream.close();
    }
  }

  it('aborts the upstream request when the client disconnects mid-stream', async () => {
    let upstreamClosed!: () => void;
    const closed = new Promise<void>((r) => (upstreamClosed = r));
    const slow = createServer((req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const timer = setInterval(() => res.write('event: ping\ndata: {"type":"ping"}\n\n'), 20);
      res.on('close', () => {
        clearInterval(timer);
        upstreamClosed();
      });
    });
    await expectAbortRecorded(slow, closed, async (url) => {
      const controller = new AbortController();
      const res = await fetch(`${url}/v1/messages`, {
        method: 'POST',
        headers: { 'x-api-key': 'k' },
        body: JSON.stringify({ ...body, stream: true }),
        signal: controller.signal,
      });
      const reader = res.body!.getReader();
      await reader.read();
      controller.abort();
    });
  });

  it('aborts the upstream request when the client leaves before the upstream answered', async () => {
    let upstreamGot!: () => void;
    const got = new Promise<void>((r) => (upstreamGot = r));
    let upstreamClosed!: () => void;
    const closed = new Promise<void>((r) => (upstreamClosed = r));
    // Reads the request and never answers: only the proxy's abort closes this connection.
    const silent = createServer((req, res) => {
      req.resume();
      req.on('end', upstreamGot);
      res.on('close', upstreamClosed);
    });
    await expectAbortRecorded(silent, closed, async (url) => {
      const controller = new AbortController();
      const answer = fetch(`${url}/v1/messages`, {
        method: 'POST',
        headers: { 'x-api-key': 'k' },
        body: JSON.stringify(body),
        signal: controller.signal,
      }).catch((err: Error) => err);
      await got;
      controller.abort();
      expect(await answer).toBeInstanceOf(Error);
    });
  });

  it('lets a client time out on a stall, and records the abort', async () => {
    const client = new Anthropic({ apiKey: API_KEY, baseURL: h.proxy.url, maxRetries: 0, timeout: 150 });
    const named = nextLiveRequest(h.proxy);
    const err = await caught(client.messages.create(body as never, fault('stall=1500')));
    expect(err).toBeInstanceOf(Anthropic.APIConnectionTimeoutError);
    // The proxy has seen the client go and recorded the exchange once its analysis names it.
    const row = await named;
    const last = (await h.records()).at(-1)?.record;
    expect(last?.id).toBe(row.id);
    expect(last?.outcome).toBe('client_aborted');
  });
});

describe('capture never stops traffic', () => {
  it('keeps forwarding when the capture folder cannot be created, and says so on the health endpoint', async () => {
    const base = mkdtempSync(join(tmpdir(), 'cacheward-unwritable-'));
    writeFileSync(join(base, 'a-file'), 'not a folder');
    const sim = createSimulator();
    const simUrl = await sim.listen();
    const logs: string[] = [];
    const p = createProxy({
      upstream: simUrl,
      dir: join(base, 'a-file', 'captures'),
      logger: { warn: (l) => logs.push(l) },
    });
    await p.listen();
    try {
      const client = new Anthropic({ apiKey: API_KEY, baseURL: p.url, maxRetries: 0 });
      for (let i = 0; i < 3; i++) expect((await client.messages.create(body as never)).type).toBe('message');
      await p.flush();
      const health = await fetch(`${p.url}/_cacheward/health`);
      expect(health.status).toBe(503);
      const state = (await health.json()) as {
        status: string;
        capture: { state: string; error: string; failed: number };
      };
      expect(state.status).toBe('degraded');
      expect(state.capture.state).toBe('degraded');
      expect(state.capture.error).toMatch(/ENOTDIR/);
      expect(state.capture.failed).toBe(3);
      // One line, the system error's code named once (not `ENOTDIR: ENOTDIR: …`).
      expect(logs.filter((l) => l.includes('degraded'))).toEqual([
        expect.stringMatching(/^capture degraded, traffic continues: ENOTDIR: not a directory, mkdir /),
      ]);
      expect(state.capture.error).toMatch(/^ENOTDIR: not a directory/);
    } finally {
      await p.close();
      await sim.close();
    }
  });

  it('keeps forwarding on a full disk (ENOSPC), then recovers when space returns', async () => {
    const clock = new VirtualClock();
    const dir = mkdtempSync(join(tmpdir(), 'cacheward-full-'));
    const stamp = new Date(clock.now()).toISOString().replace(/[-:]/g, '').replace(/\..*$/, '');
    const names = Array.from({ length: 6 }, (_, i) =>
      join(dir, `capture-${stamp}-${process.pid}-${String(i + 1).padStart(4, '0')}.jsonl`),
    );
    for (const n of names) symlinkSync('/dev/full', n);
    const sim = createSimulator({ clock });
    const simUrl = await sim.listen();
    const logs: string[] = [];
    const p = createProxy({ upstream: simUrl, dir, clock, logger: { warn: (l) => logs.push(l) } });
    await p.listen();
    try {
      const client = new Anthropic({ apiKey: API_KEY, baseURL: p.url, maxRetries: 0 });
      for (let i = 0; i < 2; i++) expect((await client.messages.create(body as never)).type).toBe('message');
      await p.flush();
      expect(p.health().capture).toMatchObject({ state: 'degraded' });
      expect(p.health().capture.error).toMatch(/ENOSPC/);
      for (const n of names) unlinkSync(n);
      expect((await client.messages.create(body as never)).type).toBe('message');
      await p.flush();
      expect(p.health().status).toBe('ok');
      expect(logs.some((l) => l.includes('recovered'))).toBe(true);
    } finally {
      await p.close();
      await sim.close();
    }
  });
});

describe('crash safety', () => {
  /** Bytes of every file in the folder, by name. */
  const sizes = (dir: string) => {
    const out = new Map<string, number>();
    for (const n of existsSync(dir) ? readdirSync(dir) : [])
      out.set(join(dir, n), statSync(join(dir, n)).size);
    return out;
  };
  const lastByte = (file: string, size: number) => {
    const fd = openSync(file, 'r');
    try {
      const b = Buffer.alloc(1);
      readSync(fd, b, 0, 1, size - 1);
      return b[0];
    } finally {
      closeSync(fd);
    }
  };

  it('kill -9 in the middle of a record write: every complete record reads, the torn one is named', async () => {
    const sim = createSimulator({ maxBodyBytes: 64 * 1024 * 1024 });
    const simUrl = await sim.listen();
    const dir = join(mkdtempSync(join(tmpdir(), 'cacheward-kill-')), 'captures');
    const bin = builtCli();
    const child = spawn(
      process.execPath,
      [bin, 'proxy', '--port', '0', '--upstream', simUrl, '--dir', dir, '--capture', 'full'],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const exited = new Promise((r) => child.once('exit', r));
    // Where the kill landed: a file that had grown past its last complete line, with its size then.
    let torn: { file: string; size: number } | undefined;
    try {
      const url = await new Promise<string>((resolve, reject) => {
        let buf = '';
        child.stdout.on('data', (d) => {
          buf += d;
          const m = buf.match(/http:\/\/127\.0\.0\.1:\d+/);
          if (m) resolve(m[0]);
        });
        child.once('exit', (c) => reject(new Error(`exited ${c}`)));
      });
      const client = new Anthropic({ apiKey: API_KEY, baseURL: url, maxRetries: 0 });
      for (let i = 0; i < 5; i++) await client.messages.create(messagesBody(3 + i, 100) as never);
      // Each acknowledged record reaches the disk within the writer's window: wait for the lines, then
      // measure from there, so the growth watched below is the big record's own write.
      const lines = () =>
        [...sizes(dir).keys()].reduce((n, f) => n + (readFileSync(f, 'utf8').match(/\n/g)?.length ?? 0), 0);
      let acked = 5;
      const onDisk = async () => {
        while (lines() < acked) await new Promise((r) => setTimeout(r, 5));
      };
      await onDisk();
      // A ~40 MB record takes the writer milliseconds to put down: watch the folder without yielding
      // (the proxy is another process) and kill it the moment a file has grown but its last byte is not
      // a newline, i.e. while the record is half on disk. A write that finished first is a complete
      // record; the next big request tries again.
      for (let attempt = 0; attempt < 5 && !torn; attempt++) {
        await onDisk();
        const before = sizes(dir);
        await client.messages.create(messagesBody(2, 5 * 1024 * 1024 + attempt) as never);
        acked++;
        const deadline = Date.now() + 20_000;
        while (!torn && Date.now() < deadline) {
          const now = sizes(dir);
          const grown = [...now].find(([f, n]) => n > (before.get(f) ?? 0));
          if (!grown) continue;
          const [file, size] = grown;
          if (lastByte(file, size) !== 0x0a) {
            child.kill('SIGKILL');
            torn = { file, size };
          } else break; // the whole record landed before we looked: try again
        }
      }
    } finally {
      child.kill('SIGKILL');
      await exited;
      await sim.close();
    }
    expect(torn, 'the kill never landed inside a record write').toBeDefined();
    const { file } = torn as { file: string; size: number };
    // The record is on disk only in part: the file ends inside it.
    const text = readFileSync(file, 'utf8');
    expect(text.endsWith('\n')).toBe(false);
    const complete = text.split('\n').length - 1;
    const inOthers = [...sizes(dir).keys()]
      .filter((f) => f !== file)
      .reduce((n, f) => n + readFileSync(f, 'utf8').split('\n').filter(Boolean).length, 0);
    const warnings: string[] = [];
    const read = [];
    for await (const r of readCaptures([dir], { onWarning: (w) => warnings.push(w) })) read.push(r);
    // Every complete record reads, bodies whole; the torn one is skipped with its file and line.
    expect(read.length).toBe(complete + inOthers);
    expect(read.length).toBeGreaterThanOrEqual(5);
    for (const r of read) expect(r.body?.length).toBe(r.record.requestBytes);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]?.startsWith(`${file}:${complete + 1}: skipped a torn or invalid line (`)).toBe(true);
    expect(warnings[0]).toMatch(/\(\d+ characters, not JSON\)$/);
  }, 120_000);
});

describe('access', () => {
  it('refuses to bind beyond loopback without a token', async () => {
    const p = createProxy({ logger: {} });
    await expect(p.listen({ host: '0.0.0.0' })).rejects.toBeInstanceOf(ProxyConfigError);
    expect(() => p.url).toThrow(NotListeningError);
  });

  it('requires the token when one is set, and strips it before the upstream', async () => {
    const sim = createSimulator();
    const simUrl = await sim.listen();
    const dir = mkdtempSync(join(tmpdir(), 'cacheward-token-'));
    mkdirSync(dir, { recursive: true });
    const p = createProxy({ upstream: simUrl, dir, token: 'secret-token-123', logger: {} });
    await p.listen();
    try {
      const no = await fetch(`${p.url}/v1/messages`, {
        method: 'POST',
        headers: { 'x-api-key': 'k' },
        body: JSON.stringify(body),
      });
      expect(no.status).toBe(401);
      const client = new Anthropic({
        apiKey: API_KEY,
        baseURL: p.url,
        maxRetries: 0,
        defaultHeaders: { 'x-cacheward-token': 'secret-token-123' },
      });
      expect((await client.messages.create(body as never)).type).toBe('message');
      await p.flush();
      for (const f of readdirSync(dir))
        expect(readFileSync(join(dir, f), 'utf8')).not.toContain('secret-token-123');
    } finally {
      await p.close();
      await sim.close();
    }
  });
});
