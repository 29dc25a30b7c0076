// createProxy: forwards Anthropic and OpenAI traffic byte-exactly, streams responses back with backpressure,
// and records each exchange beside the stream. It never retries, never stores credentials, never blocks on capture.

import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { Agent } from 'undici';
import { PriceTable } from '../analyze/price-table.js';
import type { CaptureMode } from '../capture/capture-record.js';
import { type CaptureState, CaptureWriter } from '../capture/capture-writer.js';
import { defaultCaptureDir } from '../capture/default-dir.js';
import type { TrackedRequest } from '../conversation/conversation-tracker.js';
import type { Clock } from '../core/clock.js';
import { CachewardError } from '../core/errors.js';
import { VERSION } from '../core/version.js';
import type { Fix, FixRegistry, runFixes } from '../fixes/fix.js';
import { fixRegistry } from '../fixes/registry.js';
import { type Prefix, PrefixBuilder } from '../prefix/build-prefix.js';
import { createProxyState } from '../state/create-proxy-state.js';
import type { RequestFixState } from '../state/fix-state-codec.js';
import type { FixStateHealth } from '../state/fix-state-open.js';
import type { PreparedRequest, StateCommit, StateHealth } from '../state/proxy-state.js';
import { StateConfigError } from '../state/state-url.js';
import { withinBudget } from '../state/within-budget.js';
import { OtlpConfigError } from '../telemetry/otlp-config.js';
import { type OtlpOptions, startTelemetry } from '../telemetry/start-telemetry.js';
import { errorBody } from '../wire/provider-errors.js';
import { formatFromRoute } from '../wire/request-body.js';
import { Admission } from './admission.js';
import { afterResponse } from './after-response.js';
import { ExchangeRecorder } from './exchange-recorder.js';
import { serveExpectContinue } from './expect-continue.js';
import { fixRequest } from './fix-request.js';
import { HostCheck } from './host-check.js';
import { LiveAnalysis, type LiveRequest } from './live-analysis.js';
import { serveLive } from './live-routes.js';
import { refuse, unsendable } from './local-refusal.js';
import { MemoryRelease } from './memory-release.js';
import { ProxyMetrics } from './proxy-metrics.js';
import { tapRequestBody } from './request-body-tap.js';
import { drainRequest } from './request-drain.js';
import { ResponseTap } from './response-tap.js';
import { tolerantConnector } from './upstream-connector.js';

export const DEFAULT_ANTHROPIC_UPSTREAM = 'https://api.anthropic.com';
export const DEFAULT_OPENAI_UPSTREAM = 'https://api.openai.com';

/** Options for {@link createProxy}. */
export interface ProxyOptions {
  /** One upstream for every route (e.g. the simulator). */
  upstream?: string;
  anthropicUpstream?: string;
  openaiUpstream?: string;
  /** `off`, `hashes` (default: no prompt text kept) or `full` (exact bytes, stored as deltas). */
  capture?: CaptureMode;
  /** Capture folder; default `$XDG_STATE_HOME/cacheward` or `~/.local/state/cacheward`. */
  dir?: string;
  /** Bound on the capture folder's size in MB; the oldest files go first. */
  maxMb?: number;
  /** Fixes by name (see `cacheward proxy --help`), or fix objects. */
  fixes?: ReadonlyArray<string | Fix>;
  registry?: FixRegistry;
  /** The `ttl` fix's lifetime (default 1h). */
  fixTtl?: '5m' | '1h';
  /** Where the conversation index and fix state are kept across restarts (default `<dir>/state`). */
  stateDir?: string;
  /** `memory` (default: memory and the state file) or `redis://HOST:PORT[/DB]`, shared by a fleet. */
  state?: string;
  /** Redis key prefix (default `cacheward:`). */
  statePrefix?: string;
  /** The most a request waits for Redis before it goes out unfixed, in ms (default 50). */
  stateTimeoutMs?: number;
  /** OTLP/HTTP export: a base URL (`/v1/traces` and `/v1/metrics` are added) or options. */
  otlp?: string | OtlpOptions;
  /** The clock every timestamp comes from. Default: the system clock. */
  clock?: Clock;
  /** Port (0 = any free one) and address; binding anywhere but loopback requires `token`. */
  port?: number;
  host?: string;
  /** Required in the `x-cacheward-token` header of every request when set. */
  token?: string;
  /** Host names served besides loopback names and IP literals (others are refused: DNS rebinding). */
  allowedHosts?: readonly string[];
  /** Where the proxy says what happened (capture degraded, fix failures). Default stderr. */
  log?: (line: string) => void;
  /** Told about every finished request once the live analysis has named it (the CLI's log line). */
  onRequest?: (row: LiveRequest) => void;
  /** Prices for the live page, log and metrics (default the built-in dated table). */
  prices?: PriceTable;
}

/** A running proxy. */
export interface RunningProxy {
  url: string;
  health(): ProxyHealth;
  metrics(): string;
  /** Waits until every capture record so far is on disk (and, with OTLP on, sent to the collector). */
  flush(): Promise<void>;
  /** Every request, analyzed after its response (the live page, the log, OTLP). */
  live: LiveAnalysis;
  close(): Promise<void>;
}

export interface ProxyHealth {
  status: 'ok' | 'degraded';
  version: string;
  upstreams: { anthropic: string; openai: string };
  /** With fixes on: whether their state is kept in files (and survives a restart). */
  fixState?: FixStateHealth;
  capture: CaptureState;
  fixes: string[];
  /** Where conversations and fix state live, and whether it answers. */
  state: StateHealth;
  /** OTLP export, when on: where, and what a down collector cost. */
  otlp?: { endpoint: string; exported: number; dropped: number };
}

/** A configuration that cannot be served (for example a public address without a token). */
export class ProxyConfigError extends CachewardError {
  constructor(message: string) {
    super('CW_PROXY_CONFIG', message);
  }
}

const LOOPBACK = new Set(['127.0.0.1', '::1', 'localhost']);
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'transfer-encoding',
  'te',
  'trailer',
  'upgrade',
  'host',
  // Answered by the proxy itself (expect-continue.ts); the upstream client cannot send it.
  'expect',
]);
const SYSTEM_CLOCK: Clock = { now: () => Date.now() };

type Provider = 'anthropic' | 'openai';

function providerOf(path: string, headers: IncomingMessage['headers']): Provider {
  if (path.startsWith('/v1/messages')) return 'anthropic';
  if (path.startsWith('/v1/chat') || path.startsWith('/v1/responses')) return 'openai';
  return headers['x-api-key'] || headers['anthropic-version'] ? 'anthropic' : 'openai';
}

function forwardHeaders(
  raw: IncomingMessage['headers'],
  override?: Record<string, string>,
): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(raw)) {
    if (value === undefined || HOP_BY_HOP.has(name) || name.startsWith('x-cacheward-')) continue;
    out[name] = value;
  }
  if (override) Object.assign(out, override);
  return out;
}

function webHeaders(raw: IncomingMessage['headers']): Headers {
  const h = new Headers();
  for (const [name, value] of Object.entries(raw)) {
    if (value === undefined) continue;
    for (const v of Array.isArray(value) ? value : [value]) h.append(name, v);
  }
  return h;
}

async function readAll(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

/** Starts the proxy. Resolves once it listens; `url` is its base URL. */
export async function createProxy(options: ProxyOptions = {}): Promise<RunningProxy> {
  const host = options.host ?? '127.0.0.1';
  if (!LOOPBACK.has(host) && !options.token) {
    throw new ProxyConfigError(
      `binding to ${host} exposes your credentials to that network: pass --token (and send it as x-cacheward-token), or bind 127.0.0.1`,
    );
  }
  const log = options.log ?? ((line: string) => process.stderr.write(`cacheward proxy: ${line}\n`));
  const clock = options.clock ?? SYSTEM_CLOCK;
  const upstreams = {
    anthropic: (options.anthropicUpstream ?? options.upstream ?? DEFAULT_ANTHROPIC_UPSTREAM).replace(
      /\/+$/,
      '',
    ),
    openai: (options.openaiUpstream ?? options.upstream ?? DEFAULT_OPENAI_UPSTREAM).replace(/\/+$/, ''),
  };
  for (const u of Object.values(upstreams)) {
    try {
      new URL(u);
    } catch {
      throw new ProxyConfigError(
        `upstream ${u} is not a URL (e.g. https://api.anthropic.com or http://127.0.0.1:8080)`,
      );
    }
  }
  const registry = options.registry ?? fixRegistry(options.fixTtl ?? '1h');
  // Named fixes run in the registry's order (whatever order they were named); fix objects after them.
  const fixes = [
    ...registry.resolve((options.fixes ?? []).filter((f): f is string => typeof f === 'string')),
    ...(options.fixes ?? []).filter((f): f is Fix => typeof f !== 'string'),
  ];
  const captureMode = options.capture ?? 'hashes';
  const writer = new CaptureWriter({
    dir: options.dir ?? defaultCaptureDir(),
    mode: captureMode,
    clock,
    log,
    ...(options.maxMb !== undefined ? { maxBytes: options.maxMb * 1024 * 1024 } : {}),
  });
  const metrics = new ProxyMetrics();
  const memory = new MemoryRelease(() => writer.flush());
  const builder = new PrefixBuilder();
  // Conversations and fix state: memory and a state file, or Redis for a fleet (state/).
  let state: Awaited<ReturnType<typeof createProxyState>>;
  try {
    state = await createProxyState({
      ...(options.state !== undefined ? { state: options.state } : {}),
      ...(options.statePrefix !== undefined ? { statePrefix: options.statePrefix } : {}),
      ...(options.stateTimeoutMs !== undefined ? { stateTimeoutMs: options.stateTimeoutMs } : {}),
      ...(fixes.length
        ? { stateDir: options.stateDir ?? join(options.dir ?? defaultCaptureDir(), 'state') }
        : {}),
      log,
    });
  } catch (err) {
    if (err instanceof StateConfigError) throw new ProxyConfigError(err.message);
    throw err;
  }
  const stateBudget = options.stateTimeoutMs ?? 50;
  const recorder = new ExchangeRecorder({ writer, metrics, builder, conversations: state.local });
  let telemetry: Awaited<ReturnType<typeof startTelemetry>>;
  try {
    telemetry = await startTelemetry(options.otlp, log);
  } catch (err) {
    await state.close();
    if (err instanceof OtlpConfigError) throw new ProxyConfigError(err.message);
    throw err;
  }
  // Causes for the page, the log, the metrics and OTLP: the report's analyzer, after each response ended.
  const live = new LiveAnalysis({ prices: options.prices ?? new PriceTable() });
  live.subscribe((row, detail) => {
    if (row.cause && row.cause !== 'cold_start')
      metrics.miss(row.provider, row.cause, row.rewrittenTokens ?? 0, row.waste ?? null);
    options.onRequest?.(row);
    telemetry?.export(detail);
  });
  // Exchanges whose record is still being made (a shared state may be naming their conversation).
  const recording = new Set<Promise<void>>();
  const agent = new Agent({
    keepAliveTimeout: 60_000,
    connections: 256,
    headersTimeout: 0,
    bodyTimeout: 0,
    connect: tolerantConnector(),
  });
  const admission = new Admission({
    hosts: new HostCheck([...(options.allowedHosts ?? []), host]),
    token: options.token,
    metrics,
  });
  const version = VERSION;

  const health = (): ProxyHealth => {
    const capture = writer.state();
    const st = state.health();
    return {
      status: capture.state === 'degraded' || st.status === 'degraded' ? 'degraded' : 'ok',
      version,
      upstreams,
      capture,
      fixes: fixes.map((f) => f.name),
      state: st,
      ...(st.fixState && fixes.length ? { fixState: st.fixState } : {}),
      ...(telemetry ? { otlp: telemetry.health() } : {}),
    };
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const rawUrl = req.url ?? '/';
    const path = rawUrl.split('?')[0] ?? '/';
    const method = (req.method ?? 'GET').toUpperCase();
    const provider = providerOf(path, req.headers);
    const id = `cw_${clock.now().toString(36)}${randomBytes(5).toString('hex')}`;
    if (!admission.admit(req, res, provider, id)) return;
    if (path === '/_cacheward/health' && method === 'GET') {
      const h = health();
      res.writeHead(h.status === 'ok' ? 200 : 503, { 'content-type': 'application/json' });
      res.end(JSON.stringify(h));
      return;
    }
    if (method === 'GET' && serveLive(path, req, res, live)) return;
    if (path === '/_cacheward/metrics' && method === 'GET') {
      res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' });
      res.end(metrics.render() + state.metricsText() + (telemetry?.metricsText() ?? ''));
      return;
    }
    const format = method === 'POST' ? formatFromRoute(path) : undefined;
    const base = new URL(upstreams[provider]);
    const upstreamPath = `${base.pathname.replace(/\/+$/, '')}${rawUrl}`;
    const start = clock.now();
    const requestHeaders = webHeaders(req.headers);
    const abort = new AbortController();
    let clientGone = false;
    res.on('close', () => {
      if (!res.writableFinished) {
        clientGone = true;
        abort.abort();
      }
    });

    // The request body: streamed as it arrives (tapped for capture), or read whole when a fix needs it.
    const received: Buffer[] = [];
    let forwardedBody: Buffer | undefined;
    let clientBody: Buffer | undefined;
    let fixNotes: ReturnType<typeof runFixes>['notes'] = [];
    let prefix: Prefix | undefined;
    let headerOverride: Record<string, string> | undefined;
    let body: Readable | Buffer | undefined;
    let tracked: TrackedRequest | undefined;
    let prepared: PreparedRequest | undefined;
    let after: RequestFixState | undefined;
    let committing: Promise<StateCommit> | undefined;
    if (fixes.length && format) {
      const fixed = await fixRequest(
        { fixes, builder, state, log, chains: recorder.chains },
        { id, original: await readAll(req), format, provider, route: path, requestHeaders, start },
      );
      ({ forwarded: forwardedBody, client: clientBody, notes: fixNotes, prefix, headerOverride } = fixed);
      ({ prepared, after } = fixed);
      tracked = prepared?.tracked;
      body = forwardedBody;
    } else if (method !== 'GET' && method !== 'HEAD') {
      body = tapRequestBody(req, res, received);
    }

    // The conversation learns of the request as soon as the upstream's status is known; the client's
    // response ends only after that (at most the state budget later), so its next request finds it.
    const commitState = (status: number | undefined): void => {
      if (prepared && !committing) committing = state.commit(prepared, path, status, after);
    };
    const finish = (facts: {
      status?: number;
      firstByte?: number;
      outcome: string;
      error?: string;
      response?: Awaited<ReturnType<ResponseTap['finish']>>;
    }) => {
      const forwarded = forwardedBody ?? Buffer.concat(received);
      received.length = 0;
      // No answer came (or the client left first): the turn is committed now, as it is.
      commitState(facts.status);
      const end = clock.now();
      setImmediate(() => {
        if (!format && !forwarded.length) return;
        const exchange = {
          id,
          provider: format ? provider : ('unknown' as const),
          route: path,
          method,
          requestHeaders,
          forwarded,
          ...(clientBody ? { client: clientBody } : {}),
          ...(prefix ? { prefix } : {}),
          ...(tracked ? { tracked } : {}),
          fixes: fixNotes,
          start,
          end,
          ...facts,
        };
        const done = afterResponse({ recorder, builder, state, log, live }, exchange, committing).finally(
          () => recording.delete(done),
        );
        recording.add(done);
        memory.afterLargeBody(forwarded.length + (clientBody?.length ?? 0));
      });
    };

    let upstream: Awaited<ReturnType<Agent['request']>>;
    try {
      upstream = await agent.request({
        origin: base.origin,
        path: upstreamPath,
        method: method as 'POST',
        headers: forwardHeaders(req.headers, headerOverride),
        body: body ?? null,
        signal: abort.signal,
      });
    } catch (err) {
      if (clientGone) {
        finish({ outcome: 'client_aborted' });
        return;
      }
      const local = unsendable(err);
      if (local) {
        refuse(req, res, { provider, id, metrics, status: 400, reason: 'unsendable', message: local });
        finish({ outcome: 'refused', error: local });
        return;
      }
      drainRequest(req, res);
      metrics.upstreamError(provider);
      const message = `cacheward proxy: could not reach the upstream ${base.origin}: ${(err as Error).message}. The request was not answered upstream; check --upstream.`;
      if (!res.headersSent) {
        res.writeHead(502, { 'content-type': 'application/json' });
        res.end(JSON.stringify(errorBody(provider, 500, message, id)));
      } else res.destroy();
      finish({ outcome: 'upstream_error', error: message });
      return;
    }
    const firstByte = clock.now();
    const responseHeaders: Record<string, string | string[]> = {};
    for (const [name, value] of Object.entries(upstream.headers)) {
      if (value === undefined || HOP_BY_HOP.has(name)) continue;
      responseHeaders[name] = value as string | string[];
    }
    commitState(upstream.statusCode);
    res.writeHead(upstream.statusCode, responseHeaders);
    const header = (n: string) => {
      const v = upstream.headers[n];
      return Array.isArray(v) ? (v[0] ?? null) : (v ?? null);
    };
    const tap = format
      ? new ResponseTap(format, header('content-type'), header('content-encoding'))
      : undefined;
    const ended = async (outcome: string, error?: string) =>
      finish({
        status: upstream.statusCode,
        firstByte,
        outcome,
        ...(error ? { error } : {}),
        ...(tap ? { response: await tap.finish() } : {}),
      });
    try {
      for await (const chunk of upstream.body) {
        const buf = chunk as Buffer;
        tap?.push(buf);
        if (!res.write(buf)) await drained(res);
        if (clientGone) break;
      }
      if (!clientGone) {
        commitState(upstream.statusCode);
        if (committing) await withinBudget(committing, stateBudget);
        res.end();
        await ended(upstream.statusCode >= 400 ? 'error' : 'complete');
        return;
      }
      upstream.body.destroy();
      await ended('client_aborted');
    } catch (err) {
      if (clientGone) {
        await ended('client_aborted');
        return;
      }
      // The upstream dropped mid-body: the client sees the same, a connection that ends without a clean close.
      metrics.upstreamError(provider);
      const socket = res.socket;
      if (socket && typeof socket.resetAndDestroy === 'function') socket.resetAndDestroy();
      else res.destroy();
      await ended('upstream_reset', `upstream connection dropped mid-response: ${(err as Error).message}`);
    }
  };

  const server: Server = createServer((req, res) => listener(req, res));
  serveExpectContinue(server, (req, res) => listener(req, res));
  const listener = (req: IncomingMessage, res: ServerResponse) => {
    handle(req, res).catch((err) => {
      log(`unexpected error (the client got a 500): ${String(err)}`);
      if (!res.headersSent) {
        res.writeHead(500, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            type: 'error',
            error: { type: 'api_error', message: 'cacheward proxy: internal error' },
          }),
        );
      } else res.destroy();
    });
  };
  server.keepAliveTimeout = 65_000;
  server.requestTimeout = 0;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${address.port}`;
  state.started(url);
  return {
    url,
    health,
    metrics: () => metrics.render(),
    live,
    flush: async () => {
      await new Promise((r) => setImmediate(r));
      await Promise.all([...recording]);
      await writer.flush();
      await telemetry?.flush();
    },
    async close() {
      memory.stop();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await new Promise((r) => setImmediate(r));
      await Promise.all([...recording]);
      await writer.close();
      await state.close();
      await telemetry?.shutdown();
      await agent.close();
    },
  };
}

function drained(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.on('drain', done);
    res.on('close', done);
  });
}
