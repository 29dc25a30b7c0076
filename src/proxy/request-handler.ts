// The proxy's handler for one client request: admission, its own routes, the fix stage, forwarding (and the
// client's own bytes when the provider refuses a fix), and the record made after the response. It must never
// alter a request no fix asked to change, nor wait on capture.

import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import type { Agent } from 'undici';
import type { TrackedRequest } from '../conversation/conversation-tracker.js';
import type { Clock } from '../core/clock.js';
import { concatBody } from '../fixes/body-buffer.js';
import type { Fix, runFixes } from '../fixes/fix.js';
import { afterRefusal, refusedNotes } from '../fixes/withdrawal.js';
import type { Prefix, PrefixBuilder } from '../prefix/build-prefix.js';
import type { RequestFixState } from '../state/fix-state-codec.js';
import type { PreparedRequest, ProxyState, StateCommit } from '../state/proxy-state.js';
import { formatFromRoute } from '../wire/request-body.js';
import { type AdminRoutes, serveAdmin } from './admin-routes.js';
import type { Admission } from './admission.js';
import { afterResponse } from './after-response.js';
import { ClientAbort } from './client-abort.js';
import type { ExchangeFacts, ExchangeRecorder } from './exchange-recorder.js';
import type { FixRefusals } from './fix-refusals.js';
import { fixRequest } from './fix-request.js';
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
  recording: Set<Promise<void>>;
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
    let unfixed: { body: Buffer; refused(status: number, message: string): void } | undefined;
    if (fixes.length && format) {
      const fixed = await fixRequest(
        { fixes, builder, state, log, chains: recorder.chains },
        {
          id,
          original: await readAll(req),
          format,
          provider,
          route: path,
          requestHeaders: requestHeaders(),
          start,
        },
      );
      ({ forwarded: forwardedBody, client: clientBody, notes: fixNotes, prefix, headerOverride } = fixed);
      ({ prepared, after } = fixed);
      tracked = prepared?.tracked;
      body = forwardedBody;
      const { client, clientPrefix } = fixed;
      if (client && clientPrefix) {
        // The provider refused the fixed form: the client's own bytes go out, and what is committed,
        // captured and counted is that (the fixes that changed the request withdrawn for the conversation).
        unfixed = {
          body: client,
          refused: (status, message) => {
            const names = fixNotes
              .filter((n) => n.changed && fixes.some((f) => f.name === n.fix))
              .map((n) => n.fix);
            const model = clientPrefix.model;
            fixNotes = refusedNotes(fixNotes, names, { status, message }, model);
            if (after) after = afterRefusal(after, names, model, clientPrefix);
            forwardedBody = client;
            clientBody = undefined;
            prefix = clientPrefix;
            deps.refusals?.add(names);
            log(
              `fix ${names.join(', ')} refused by the provider (${status}: ${message}); the client's own request was sent instead, and ${names.length === 1 ? 'that fix is' : 'those fixes are'} off for this conversation on ${model || 'this model'}`,
            );
          },
        };
      }
    } else if (method !== 'GET' && method !== 'HEAD') {
      body = tapRequestBody(req, res, received);
    }

    // The conversation learns of the request once the upstream's status is known: memory state commits
    // at the status (at once); a shared state's commit is written as the response ends, before its last
    // byte, and not waited for (Redis runs commands in arrival order, so the client's next request, which
    // can only follow the response, reads after it), so its I/O never delays the status and body.
    const commitState = (status: number | undefined): void => {
      if (prepared && !committing) committing = state.commit(prepared, path, status, after);
    };
    const finish = (facts: ForwardFacts) => {
      // A body that came in one chunk (most: the socket reads 64 KB at a time) is that chunk, not a copy of it
      // (the chunk is the parser's own copy, sized to the body, and nothing writes to it).
      const forwarded =
        forwardedBody ?? (received.length === 1 ? (received[0] as Buffer) : Buffer.concat(received));
      received.length = 0;
      // No answer came (or the client left first): the turn is committed now, as it is.
      commitState(facts.status);
      const end = clock.now();
      setImmediate(() => {
        if (!format && !forwarded.length) return;
        // Keys set in order, then the forward's facts assigned (a spread followed by more keys, or of
        // `facts` after them, takes Node 20's slower path). The same object.
        const exchange: ExchangeFacts = {
          id,
          provider: format ? provider : ('unknown' as const),
          route: path,
          method,
          requestHeaders: requestHeaders(),
          forwarded,
        } as ExchangeFacts;
        if (clientBody) exchange.client = clientBody;
        if (prefix) exchange.prefix = prefix;
        if (tracked) exchange.tracked = tracked;
        exchange.fixes = fixNotes;
        exchange.start = start;
        exchange.end = end;
        Object.assign(exchange, facts);
        const done = afterResponse(
          { recorder, state, log, live, slices: deps.slices },
          exchange,
          committing,
        ).finally(() => deps.recording.delete(done));
        deps.recording.add(done);
        memory.afterLargeBody(forwarded.length + (clientBody?.length ?? 0));
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
      headerOverride,
      body,
      ...(unfixed ? { unfixed } : {}),
      signal: abort,
      now: () => clock.now(),
      clientGone: () => clientGone,
      statusKnown: (status) => {
        if (state.kind === 'memory') commitState(status);
      },
      beforeEnd: async (status) => commitState(status),
      finish,
    });
  };
}
