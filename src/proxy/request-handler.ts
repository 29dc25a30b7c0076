// The proxy's handler for one client request: admission, its own routes, then the exchange (exchange.ts: the fix
// stage, the client's own bytes when the provider refuses a fix, the commit), forwarding, and the record made after
// the response. It must never alter a request no fix asked to change, nor wait on capture.

import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import type { Agent } from 'undici';
import type { Clock } from '../core/clock.js';
import { concatBody } from '../fixes/body-buffer.js';
import type { Fix } from '../fixes/fix.js';
import type { PrefixBuilder } from '../prefix/build-prefix.js';
import type { ProxyState } from '../state/proxy-state.js';
import { formatFromRoute } from '../wire/request-body.js';
import { type AdminRoutes, serveAdmin } from './admin-routes.js';
import type { Admission } from './admission.js';
import { afterResponse } from './after-response.js';
import { ClientAbort } from './client-abort.js';
import { Exchange, type ExchangeDeps } from './exchange.js';
import type { ExchangeRecorder } from './exchange-recorder.js';
import type { FixRefusals } from './fix-refusals.js';
import { upstreamOf, webHeaders } from './forward-headers.js';
import { type ForwardFacts, forwardUpstream } from './forward-upstream.js';
import type { LiveAnalysis } from './live-analysis.js';
import type { MemoryHooks } from './memory-release.js';
import type { ProxyMetrics } from './proxy-metrics.js';
import { tapRequestBody } from './request-body-tap.js';
import type { WorkSlices } from './work-slices.js';

export interface HandlerDeps {
  clock: Clock;
  log: (line: string) => void;
  upstreams: { anthropic: string; openai: string };
  fixes: readonly Fix[];
  builder: PrefixBuilder;
  state: ProxyState;
  recorder: ExchangeRecorder;
  live: LiveAnalysis;
  metrics: ProxyMetrics;
  memory: MemoryHooks;
  admission: Admission;
  agent: Agent;
  admin: AdminRoutes;
  /** Exchanges whose record is still being made (a shared state may be naming their conversation). */
  recording: Set<Promise<unknown>>;
  /** The after-response work queue, run a few ms at a time. */
  slices: WorkSlices;
  /** Fixed requests the provider refused, by fix (for the health endpoint). */
  refusals?: FixRefusals;
}

/** The body whole, for the fix stage: in a size class (body-buffer.ts), as the body it forwards is. */
async function readAll(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let length = 0;
  for await (const c of req) {
    chunks.push(c as Buffer);
    length += (c as Buffer).length;
  }
  return concatBody(chunks, length);
}

// Request ids take 5 random bytes each from a pool filled 4 KB at a time (one call per 819 requests).
let pool = Buffer.alloc(0);
let at = 0;
function randomHex10(): string {
  if (at + 5 > pool.length) {
    pool = randomBytes(4095);
    at = 0;
  }
  at += 5;
  return pool.toString('hex', at - 5, at);
}

export function createRequestHandler(
  deps: HandlerDeps,
): (req: IncomingMessage, res: ServerResponse) => Promise<void> {
  const { clock, log, fixes, builder, state, recorder, live, metrics, memory, admission } = deps;
  // Each upstream's URL, parsed once (the config checked them when the proxy was made).
  const bases = { anthropic: new URL(deps.upstreams.anthropic), openai: new URL(deps.upstreams.openai) };
  const exchangeDeps: ExchangeDeps = {
    log,
    fixes,
    builder,
    state,
    recorder,
    ...(deps.refusals ? { refusals: deps.refusals } : {}),
  };
  return async (req, res) => {
    const rawUrl = req.url ?? '/';
    const path = rawUrl.split('?')[0] ?? '/';
    const method = (req.method ?? 'GET').toUpperCase();
    const provider = upstreamOf(path, req.headers);
    const id = `cw_${clock.now().toString(36)}${randomHex10()}`;
    if (!admission.admit(req, res, provider, id)) return;
    if (serveAdmin(path, method, req, res, deps.admin)) return;
    const format = method === 'POST' ? formatFromRoute(path) : undefined;
    const base = bases[provider];
    const upstreamPath = `${base.pathname.replace(/\/+$/, '')}${rawUrl}`;
    const start = clock.now();
    // Web Headers are built when something reads them: at once for the fix stage, after the response otherwise.
    let headers: Headers | undefined;
    const requestHeaders = (): Headers => {
      headers ??= webHeaders(req.headers);
      return headers;
    };
    const abort = new ClientAbort();
    let clientGone = false;
    res.on('close', () => {
      if (!res.writableFinished) {
        clientGone = true;
        abort.abort();
      }
    });

    // The request body: streamed as it arrives (tapped for capture), or read whole when a fix needs it.
    const exchange = new Exchange(exchangeDeps, {
      id,
      provider,
      format,
      route: path,
      method,
      start,
      requestHeaders,
    });
    const received: Buffer[] = [];
    let body: Readable | Buffer | undefined;
    if (exchange.fixing) {
      await exchange.fix(await readAll(req));
      body = exchange.body;
    } else if (method !== 'GET' && method !== 'HEAD') {
      body = tapRequestBody(req, res, received);
    }

    const finish = (facts: ForwardFacts) => {
      // A body that came in one chunk (most: the socket reads 64 KB at a time) is that chunk, not a copy of it
      // (the chunk is the parser's own copy, sized to the body, and nothing writes to it).
      const tapped = received.length === 1 ? (received[0] as Buffer) : Buffer.concat(received);
      received.length = 0;
      // No answer came (or the client left first): the turn is committed now, as it is.
      exchange.commit(facts.status);
      const end = clock.now();
      setImmediate(() => {
        if (!format && !(exchange.body ?? tapped).length) return;
        const record = exchange.facts(tapped, end, facts);
        const done = afterResponse(
          { recorder, state, log, live, slices: deps.slices },
          record,
          exchange.pendingCommit,
        ).finally(() => deps.recording.delete(done));
        deps.recording.add(done);
        memory.afterLargeBody(record.forwarded.length + (record.client?.length ?? 0));
        memory.afterExchange();
      });
    };

    await forwardUpstream({
      req,
      res,
      agent: deps.agent,
      metrics,
      provider,
      id,
      base,
      upstreamPath,
      method,
      format,
      headerOverride: exchange.headerOverride,
      body,
      exchange,
      signal: abort,
      now: () => clock.now(),
      clientGone: () => clientGone,
      finish,
    });
  };
}
