// Sends one request upstream and streams the answer back to the client with backpressure, mirroring an
// upstream reset as a reset. It never retries, buffers a whole response, or answers for the upstream; the
// one resend is a fixed request the provider refused (refusal.ts): then the client's own bytes go out once.

import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import type { Agent } from 'undici';
import { errorBody } from '../wire/provider-errors.js';
import type { WireFormat } from '../wire/request-body.js';
import type { ClientAbort } from './client-abort.js';
import type { Exchange } from './exchange.js';
import { forwardHeaders, responseHeaders, type UpstreamProvider } from './forward-headers.js';
import { refuse, unsendable } from './local-refusal.js';
import type { ProxyMetrics } from './proxy-metrics.js';
import { readRefusal } from './refusal.js';
import { drainRequest } from './request-drain.js';
import { ResponseTap } from './response-tap.js';

/** What happened to the exchange, for its record. */
export interface ForwardFacts {
  status?: number;
  firstByte?: number;
  outcome: string;
  error?: string;
  response?: Awaited<ReturnType<ResponseTap['finish']>>;
}

export interface ForwardInput {
  req: IncomingMessage;
  res: ServerResponse;
  agent: Agent;
  metrics: ProxyMetrics;
  provider: UpstreamProvider;
  id: string;
  base: URL;
  upstreamPath: string;
  method: string;
  format: WireFormat | undefined;
  headerOverride: Record<string, string> | undefined;
  body: Readable | Buffer | undefined;
  /**
   * The exchange (exchange.ts): when a fix changed the request, `unfixed` holds the client's own bytes; if the
   * upstream refuses the fixed request (see refusal.ts), `refused` is told before any byte reaches the
   * client, and these bytes go out once, with the client's own headers. It is told when the status is known
   * and when the response is about to end (the state's commit starts at one of them).
   */
  exchange: Pick<Exchange, 'unfixed' | 'statusKnown' | 'ending'>;
  /** Fires when the client leaves (undici aborts the request, or destroys its response body). */
  signal: ClientAbort;
  now(): number;
  /** True once the client has gone (the response closed before it finished). */
  clientGone(): boolean;
  /** Called once, when the exchange is over, with what happened. */
  finish(facts: ForwardFacts): void;
}

export async function forwardUpstream(f: ForwardInput): Promise<void> {
  const { req, res, provider, id, metrics, base } = f;
  const send = (body: Buffer | Readable | undefined, override: Record<string, string> | undefined) =>
    f.agent.request({
      origin: base.origin,
      path: f.upstreamPath,
      method: f.method as 'POST',
      headers: forwardHeaders(req.headers, override),
      body: body ?? null,
      signal: f.signal,
    });
  let upstream: Awaited<ReturnType<Agent['request']>>;
  let head: Buffer[] = [];
  try {
    upstream = await send(f.body, f.headerOverride);
    const unfixed = f.exchange.unfixed;
    if (unfixed) {
      // A refusal of the fixed bytes is read whole (an error body is small) and never reaches the client.
      const grew = Buffer.isBuffer(f.body) && f.body.length > unfixed.body.length;
      const read = await readRefusal(provider, upstream, grew);
      head = read.head;
      if (read.refusal !== undefined) {
        unfixed.refused(upstream.statusCode, read.refusal);
        head = [];
        upstream = await send(unfixed.body, undefined);
      }
    }
  } catch (err) {
    if (f.clientGone()) {
      f.finish({ outcome: 'client_aborted' });
      return;
    }
    const local = unsendable(err);
    if (local) {
      refuse(req, res, { provider, id, metrics, status: 400, reason: 'unsendable', message: local });
      f.finish({ outcome: 'refused', error: local });
      return;
    }
    drainRequest(req, res);
    metrics.upstreamError(provider);
    const message = `cacheward proxy: could not reach the upstream ${base.origin}: ${(err as Error).message}. The request was not answered upstream; check --upstream.`;
    if (!res.headersSent) {
      res.writeHead(502, { 'content-type': 'application/json' });
      res.end(JSON.stringify(errorBody(provider, 500, message, id)));
    } else res.destroy();
    f.finish({ outcome: 'upstream_error', error: message });
    return;
  }
  const firstByte = f.now();
  f.exchange.statusKnown(upstream.statusCode);
  res.writeHead(upstream.statusCode, responseHeaders(upstream.headers));
  const header = (n: string) => {
    const v = upstream.headers[n];
    return Array.isArray(v) ? (v[0] ?? null) : (v ?? null);
  };
  const tap = f.format
    ? new ResponseTap(f.format, header('content-type'), header('content-encoding'))
    : undefined;
  const ended = async (outcome: string, error?: string) =>
    f.finish({
      status: upstream.statusCode,
      firstByte,
      outcome,
      ...(error ? { error } : {}),
      ...(tap ? { response: await tap.finish() } : {}),
    });
  // Chunks the upstream sent together reach the client in one write, and the last with the response's end:
  // the client's socket stays corked while the next chunk (or the end) is already here, and is flushed
  // whenever the next one must be waited for. A chunk is never held back waiting on the upstream.
  const body = upstream.body;
  const chunks = head.length ? withHead(head, body) : body;
  let corked = false;
  const flush = () => {
    if (!corked) return;
    corked = false;
    res.uncork();
  };
  try {
    for await (const chunk of chunks) {
      const buf = chunk as Buffer;
      tap?.push(buf);
      if (!corked) {
        res.cork();
        corked = true;
      }
      if (!res.write(buf)) {
        flush();
        await drained(res);
      }
      if (f.clientGone()) break;
      if (!arrived(body)) flush();
    }
    if (!f.clientGone()) {
      f.exchange.ending(upstream.statusCode);
      // Ends the response and writes what is still corked with it (end() fully uncorks the socket).
      corked = false;
      res.end();
      await ended(upstream.statusCode >= 400 ? 'error' : 'complete');
      return;
    }
    flush();
    upstream.body.destroy();
    await ended('client_aborted');
  } catch (err) {
    if (f.clientGone()) {
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
}

/** The chunks already read of a body (while telling a refusal), then the rest of it. */
async function* withHead(head: readonly Buffer[], body: Readable): AsyncGenerator<Buffer> {
  yield* head;
  for await (const chunk of body) yield chunk as Buffer;
}

/**
 * Whether more of the body is already in hand: a chunk buffered, or the end received (the stream's own
 * `ended`, set when the end is pushed, before 'end' is emitted). Unknown reads as no: flush now.
 */
function arrived(body: Readable): boolean {
  if (body.readableLength > 0) return true;
  const state = (body as Readable & { _readableState?: { ended?: unknown } })._readableState;
  return state?.ended === true;
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
