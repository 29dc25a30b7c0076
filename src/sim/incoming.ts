// The part of every simulated route that comes before the provider logic: size limit, API key, body,
// faults that answer at once. Returns the request's facts, or the error Response to send instead. It never
// runs a cache model or builds a reply.

import { errorResponse, overloadedStatus, type Provider } from '../wire/provider-errors.js';
import { chooseFaults, type Fault, FaultSpecError } from './faults.js';
import type { ResponseStore } from './response-store.js';
import type { SimContext } from './sim-context.js';
import type { AbortState, HeaderReader, SimRequest } from './sim-request.js';
import type { StreamContext } from './sse-body.js';

/** A request that got past the preamble. */
export interface Incoming {
  provider: Provider;
  requestId: string;
  /** The request's start on the simulator's clock. */
  start: number;
  scope: string;
  bytes: Buffer;
  headers: HeaderReader;
  faults: Fault[];
  signal: AbortState;
  /** A WebSocket's connection-local cache (sim-request.ts). */
  local?: ResponseStore;
}

function apiKeyOf(provider: Provider, headers: HeaderReader): string | undefined {
  const bearer = headers.get('authorization')?.match(/^Bearer\s+(.+)$/i)?.[1];
  return provider === 'anthropic' ? (headers.get('x-api-key') ?? bearer) : bearer;
}

export async function readIncoming(
  ctx: SimContext,
  request: SimRequest,
  provider: Provider,
): Promise<Incoming | Response> {
  // The body is read first, as before any answer (a body declared too large is not read at all).
  const declared = Number(request.headers.get('content-length') ?? '0');
  let bytes: Buffer | undefined;
  if (declared > ctx.options.maxBodyBytes) await request.discard();
  else bytes = await request.body();
  ctx.countRequest(provider);
  const start = ctx.clock.now();
  const requestId = ctx.id(provider === 'anthropic' ? 'req_' : 'req_');
  const fail = (status: number, message: string, headers: Record<string, string> = {}) => {
    ctx.counters.errors++;
    return errorResponse(provider, status, message, requestId, headers);
  };
  const key = apiKeyOf(provider, request.headers);
  if (ctx.options.requireApiKey && !key) {
    return fail(
      401,
      provider === 'anthropic'
        ? 'x-api-key header is required'
        : "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
    );
  }
  if (bytes === undefined) {
    return fail(413, `Request exceeds the maximum allowed number of bytes (${ctx.options.maxBodyBytes}).`);
  }
  if (bytes.length > ctx.options.maxBodyBytes) {
    return fail(413, `Request exceeds the maximum allowed number of bytes (${ctx.options.maxBodyBytes}).`);
  }
  let faults: Fault[];
  try {
    faults = chooseFaults(request.headers.get('x-sim-fault'), ctx.options.faults, () => ctx.random());
  } catch (err) {
    if (err instanceof FaultSpecError) return fail(400, `x-sim-fault: ${err.message}`);
    throw err;
  }
  if (faults.length) ctx.counters.faults++;
  for (const f of faults) {
    if (f.name === 'rate-limit') {
      return fail(429, 'Number of requests has exceeded your rate limit. Please try again later.', {
        'retry-after': '1',
      });
    }
    if (f.name === 'overloaded') return fail(overloadedStatus(provider), 'Overloaded');
    if (f.name === 'server-error') return fail(500, 'Internal server error');
  }
  // A test's refusal of a request that carries a marker (what a fix writes, say): a 400 (or the status
  // `x-sim-refuse-status` names), as the provider's own refusal, when the body holds the header's text.
  const refuseIf = request.headers.get('x-sim-refuse-if');
  if (refuseIf && bytes.includes(refuseIf)) {
    const status = Number(request.headers.get('x-sim-refuse-status') ?? '400');
    return fail(
      status === 422 ? 422 : 400,
      `refused by x-sim-refuse-if: the body contains ${JSON.stringify(refuseIf)}`,
    );
  }
  return {
    provider,
    requestId,
    start,
    scope: ctx.scope(key),
    bytes,
    headers: request.headers,
    faults,
    signal: request.signal,
    ...(request.local ? { local: request.local } : {}),
  };
}

/** The stall to apply before the first byte (a `stall` fault), in ms. */
export function stallOf(faults: readonly Fault[]): number {
  return faults.find((f) => f.name === 'stall')?.ms ?? 0;
}

/** The pause between streamed events (a `slow` fault), in ms. */
export function pauseOf(faults: readonly Fault[]): number {
  return faults.find((f) => f.name === 'slow')?.ms ?? 0;
}

export function hasFault(faults: readonly Fault[], name: Fault['name']): boolean {
  return faults.some((f) => f.name === name);
}

/** The stream settings of a request: its faults, id and the simulator's sleep. */
export function streamContext(ctx: SimContext, incoming: Incoming): StreamContext {
  return {
    provider: incoming.provider,
    requestId: incoming.requestId,
    pauseMs: pauseOf(incoming.faults),
    errorMidStream: hasFault(incoming.faults, 'error-mid-stream'),
    resetMidStream: hasFault(incoming.faults, 'reset-mid-stream'),
    sleep: (ms) => ctx.sleep(ms),
  };
}
