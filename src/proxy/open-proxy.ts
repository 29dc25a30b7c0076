// Starts a configured proxy: capture writer, state, telemetry, the request handler and its HTTP server, and
// stops them in order. It never retries, never stores credentials, never blocks a response on capture.

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { Agent } from 'undici';
import { CaptureWriter } from '../capture/capture-writer.js';
import { defaultCaptureDir } from '../capture/default-dir.js';
import type { ListenOptions } from '../core/listen.js';
import { redactUrl } from '../core/redact-url.js';
import { VERSION } from '../core/version.js';
import { PrefixBuilder } from '../prefix/build-prefix.js';
import { createProxyState } from '../state/create-proxy-state.js';
import { StateConfigError } from '../state/state-url.js';
import { OtlpConfigError } from '../telemetry/otlp-config.js';
import { startTelemetry } from '../telemetry/start-telemetry.js';
import { Admission } from './admission.js';
import { ExchangeRecorder } from './exchange-recorder.js';
import { serveExpectContinue } from './expect-continue.js';
import { FixRefusals } from './fix-refusals.js';
import { ForwardProxy, forwardSettings } from './forward-proxy.js';
import { HostCheck } from './host-check.js';
import type { LiveAnalysis } from './live-analysis.js';
import { LiveEvents } from './live-events.js';
import { type MemoryHooks, MemoryRelease, NO_RELEASE, processMemory } from './memory-release.js';
import { OriginCheck } from './origin-check.js';
import { listenHost, type ProxyConfig } from './proxy-config.js';
import type { ProxyMetrics } from './proxy-metrics.js';
import { ProxyConfigError, type ProxyHealth, type ProxyOptions } from './proxy-options.js';
import { createRequestHandler } from './request-handler.js';
import { tolerantConnector } from './upstream-connector.js';
import { WebSocketRelay } from './websocket-relay.js';
import { processCpuMs, WorkSlices } from './work-slices.js';

/** The proxy once it listens: what createProxy's handle delegates to. */
export interface OpenProxy {
  url: string;
  health(): ProxyHealth;
  flush(): Promise<void>;
  close(): Promise<void>;
}

/** Opens everything the proxy runs with and listens; on a failure, what was opened is closed again. */
export async function openProxy(
  options: ProxyOptions,
  config: ProxyConfig,
  at: ListenOptions,
  metrics: ProxyMetrics,
  live: LiveAnalysis,
): Promise<OpenProxy> {
  const { clock, log, logger, upstreams, fixes } = config;
  const host = listenHost(at, options);
  // Forward mode's CA first (created on first use): a CA that cannot be used leaves nothing open.
  const forwarding = options.forward ? forwardSettings(options.forward) : undefined;
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
  let telemetry: Awaited<ReturnType<typeof startTelemetry>>;
  try {
    telemetry = await startTelemetry(options.otlp, logger.info, upstreams);
  } catch (err) {
    await state.close();
    if (err instanceof OtlpConfigError) throw new ProxyConfigError(err.message);
    throw err;
  }
  // The capture opens its first file at once: only once the state and telemetry are known to start, so a
  // configuration refused above leaves no file behind.
  const writer = new CaptureWriter({
    dir: options.dir ?? defaultCaptureDir(),
    mode: options.capture ?? 'hashes',
    clock,
    log,
    ...(options.maxMb !== undefined ? { maxBytes: options.maxMb * 1024 * 1024 } : {}),
  });
  // Exchanges whose response has not finished: a forced collection waits until there are none.
  let open = 0;
  // Forced collections are the process owner's choice (the CLI's): a library user's collector is left alone.
  const memory: MemoryHooks = options.releaseMemory
    ? new MemoryRelease({
        settled: () => writer.flush(),
        busy: (): boolean => open > 0 || slices.pending > 0 || relay.busy,
      })
    : NO_RELEASE;
  const builder = new PrefixBuilder();
  const recorder = new ExchangeRecorder({ writer, metrics, builder, conversations: state.local });
  // Causes for the page, the log, the metrics and OTLP: the report's analyzer, after each response ended.
  const unsubscribe = live.subscribe((row, detail) => {
    if (row.cause && row.cause !== 'cold_start')
      metrics.miss(row.provider, row.cause, row.rewrittenTokens ?? 0, row.waste ?? null);
    if (row.unfixed) metrics.wentUnfixed(row.rewrittenTokens ?? 0, row.waste ?? null);
    logger.request(row);
    telemetry?.export(detail);
  });
  // A fleet's live analysis reads every proxy's records, so the live views add up to the merged report.
  if (state.feed) live.useFeed(state.feed);
  const events = new LiveEvents(live);
  const recording = new Set<Promise<unknown>>();
  // CACHEWARD_SLICE_CPU=1 (bench:proxy) also tells the CPU time of the longest slice: preempted or busy.
  const slices =
    process.env.CACHEWARD_SLICE_CPU === '1'
      ? new WorkSlices(undefined, undefined, undefined, processCpuMs)
      : new WorkSlices();
  const agent = new Agent({
    keepAliveTimeout: 60_000,
    connections: 256,
    headersTimeout: 0,
    bodyTimeout: 0,
    connect: tolerantConnector(),
  });
  const admission = new Admission({
    hosts: new HostCheck([...(options.allowedHosts ?? []), host]),
    origins: new OriginCheck(options.allowedOrigins),
    token: options.token,
    metrics,
  });

  const refusals = new FixRefusals();
  const fixNames = fixes.map((f) => f.name);
  const health = (): ProxyHealth => {
    const capture = writer.state();
    const st = state.health();
    return {
      status: capture.state === 'degraded' || st.status === 'degraded' ? 'degraded' : 'ok',
      version: VERSION,
      upstreams: { anthropic: redactUrl(upstreams.anthropic), openai: redactUrl(upstreams.openai) },
      capture,
      fixes: fixes.map((f) => f.name),
      ...(fixes.length ? { fixRefusals: refusals.counts(fixNames) } : {}),
      state: st.kind === 'redis' ? { ...st, unfixedCost: live.unfixed() } : st,
      ...(st.fixState && fixes.length ? { fixState: st.fixState } : {}),
      ...(telemetry ? { otlp: telemetry.health() } : {}),
      memory: processMemory(state.local.store.sizes(), memory),
      websockets: relay.counts(),
      ...(forwarding
        ? {
            forward: {
              ca: forwarding.ca.certPath,
              openHosts: [...forwarding.openHosts],
              tunnel: forwarding.tunnel,
            },
          }
        : {}),
    };
  };

  const handlerDeps: Parameters<typeof createRequestHandler>[0] = {
    clock,
    log,
    upstreams,
    fixes,
    builder,
    state,
    recorder,
    live,
    metrics,
    memory,
    admission,
    agent,
    recording,
    slices,
    refusals,
    admin: {
      health,
      metricsText: () =>
        metrics.render() +
        refusals.metricsText(fixNames) +
        state.metricsText() +
        slices.metricsText() +
        relay.metricsText() +
        (forward?.metricsText() ?? '') +
        events.metricsText() +
        (telemetry?.metricsText() ?? ''),
      live,
      events,
    },
  };
  const handle = createRequestHandler(handlerDeps);

  // Responses WebSockets: each `response.create` recorded through the same path as an HTTP exchange.
  const relay: WebSocketRelay = new WebSocketRelay({
    clock,
    log,
    metrics,
    memory,
    recorder,
    state,
    live,
    slices,
    recording,
  });
  const bases = { anthropic: new URL(upstreams.anthropic), openai: new URL(upstreams.openai) };
  const server: Server = createServer((req, res) => listener(req, res));
  serveExpectContinue(server, (req, res) => listener(req, res));
  server.on('upgrade', (req, socket, head) => relay.upgrade(req, socket, head, bases, admission));
  // Forward mode: CONNECT to a provider host is served by a handler whose upstream is that host (or the
  // configured upstream), behind an admission that knows the host; every other CONNECT is a tunnel.
  let forward: ForwardProxy | undefined;
  if (forwarding) {
    const inner = new Admission({
      hosts: new HostCheck([...forwarding.openHosts]),
      origins: new OriginCheck(options.allowedOrigins),
      metrics,
    });
    const explicit = (u: string | undefined) => u?.replace(/\/+$/, '');
    const anthropic = explicit(options.anthropicUpstream ?? options.upstream);
    const openai = explicit(options.openaiUpstream ?? options.upstream);
    forward = new ForwardProxy({
      ...forwarding,
      token: options.token,
      metrics,
      warn: log,
      serverFor: (origin) => {
        const ups = { anthropic: anthropic ?? origin, openai: openai ?? origin };
        const at = { anthropic: new URL(ups.anthropic), openai: new URL(ups.openai) };
        const hostListener = listenerFor(
          createRequestHandler({ ...handlerDeps, upstreams: ups, admission: inner }),
        );
        return {
          request: hostListener,
          upgrade: (req, socket, head) => relay.upgrade(req, socket, head, at, inner),
        };
      },
    });
    const f = forward;
    server.on('connect', (req, socket, head) => f.connect(req, socket, head));
  }
  // Every request's handling, until it has ended: close() waits for them, or an exchange still in flight
  // when the connections are cut would be recorded after close() resolved (into a file opened again).
  const handling = new Set<Promise<void>>();
  const listenerFor = (h: typeof handle) => (req: IncomingMessage, res: ServerResponse) => {
    open++;
    res.once('close', () => open--);
    const done: Promise<void> = h(req, res)
      .catch((err) => {
        logger.error(`unexpected error (the client got a 500): ${String(err)}`, err);
        if (!res.headersSent) {
          res.writeHead(500, { 'content-type': 'application/json' });
          res.end(
            JSON.stringify({
              type: 'error',
              error: { type: 'api_error', message: 'cacheward proxy: internal error' },
            }),
          );
        } else res.destroy();
      })
      .finally(() => handling.delete(done));
    handling.add(done);
  };
  const listener = listenerFor(handle);
  server.keepAliveTimeout = 65_000;
  server.requestTimeout = 0;
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(at.port ?? 0, host, () => {
        server.off('error', reject);
        resolve();
      });
    });
  } catch (err) {
    unsubscribe();
    memory.stop();
    await writer.close();
    await state.close();
    await telemetry?.shutdown();
    await agent.close();
    throw err;
  }
  const address = server.address() as AddressInfo;
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${address.port}`;
  state.started(url);
  return {
    url,
    health,
    flush: async () => {
      await new Promise((r) => setImmediate(r));
      await Promise.all([...recording]);
      await writer.flush();
      await telemetry?.flush();
    },
    async close() {
      unsubscribe();
      events.close();
      memory.stop();
      await relay.close();
      forward?.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await Promise.all([...handling]);
      await new Promise((r) => setImmediate(r));
      await Promise.all([...recording]);
      await writer.close();
      await state.close();
      await telemetry?.shutdown();
      await agent.close();
    },
  };
}
