// createSimulator: an offline Anthropic and OpenAI server that caches like the real ones, usable in-process
// through `fetch` or over HTTP on 127.0.0.1. Binds loopback only unless told otherwise; keeps no API key.

import type { Server } from 'node:http';
import type { AnthropicModelFacts } from '../cache/anthropic-models.js';
import { type AdvanceableClock, OffsetClock } from '../core/clock.js';
import {
  AlreadyListeningError,
  type Listening,
  type ListenOptions,
  NotListeningError,
} from '../core/listen.js';
import { type Logger, lineLogger, loggerChannels } from '../core/logger.js';
import { errorResponse, type Provider } from '../wire/provider-errors.js';
import { anthropicRoute } from './anthropic-route.js';
import { type FaultRate, parseFaultRates } from './faults.js';
import { chatCompletionsRoute } from './openai-chat-route.js';
import { responsesRoute } from './openai-responses-route.js';
import type { ReplyScript } from './reply-script.js';
import { SimContext } from './sim-context.js';
import { jsonReply, type SimReply, toWebResponse } from './sim-reply.js';
import { fromWebRequest, type SimRequest } from './sim-request.js';
import { serve } from './web-node-bridge.js';
import { SimWebSocket } from './websocket-route.js';

/** Options for {@link createSimulator}. Every one is optional. */
export interface SimulatorOptions {
  /** The clock; default real time that `POST /_sim/clock` can move forward. Share a VirtualClock across components. */
  clock?: AdvanceableClock;
  /** Answer 401 to requests without an API key (default true). */
  requireApiKey?: boolean;
  /** Scripted replies turn by turn, matched per conversation. */
  script?: ReplyScript;
  /** Faults at random rates: `429@0.1,reset-mid-stream@0.01` or parsed rates. */
  faults?: string | FaultRate[];
  /**
   * Seed for fault draws and ids. Without it fault draws use 1 and ids are this simulator's own (no two
   * simulators answer with the same ids, as no two provider responses share one).
   */
  seed?: number;
  /** Largest accepted body (default 32 MB, as the Messages API); larger gets a 413. */
  maxBodyBytes?: number;
  /** Cap on cache entries per provider (default 2,000,000; expired entries are swept anyway). */
  maxEntries?: number;
  /** Per Anthropic model id: overrides for minimum tokens or mid-conversation support. */
  anthropicModelOverrides?: Readonly<Record<string, Partial<AnthropicModelFacts>>>;
  /** OpenAI overflow routing: misses above this many requests a minute per prefix (off by default). */
  openaiOverflowPerMinute?: number;
  /** Characters per streamed delta (default 24). */
  streamChunkChars?: number;
  /**
   * The simulated OpenAI organization has Zero Data Retention: `prompt_cache_retention` defaults to
   * `in_memory` instead of `24h` on models that support both (`cacheward sim --zdr`).
   */
  zdr?: boolean;
  /** Where unexpected errors (bugs, answered with a 500) are reported: `logger.error`. Default stderr. */
  logger?: Logger;
  /** How long a Responses WebSocket may stay open, in ms (default 60 minutes, as OpenAI). */
  websocketMaxMs?: number;
}

/** A simulator: in-process through `fetch` at once; over HTTP after `await sim.listen()`. */
export interface Simulator extends Listening {
  /** A fetch that reaches the simulator in-process: `new Anthropic({ fetch: sim.fetch })`. */
  fetch: (input: string | URL | Request, init?: RequestInit) => Promise<Response>;
  /** The Request → Response handler behind both `fetch` and HTTP. */
  handle: (request: Request) => Promise<Response>;
  clock: AdvanceableClock;
  /** Starts HTTP (default 127.0.0.1, any free port); resolves to the base URL. */
  listen(at?: ListenOptions): Promise<string>;
  /** The base URL; throws `CW_NOT_LISTENING` before `listen()` resolves and after `close()`. */
  readonly url: string;
  /** Empties every cache and counter. */
  reset(): void;
  stats(): ReturnType<SimContext['stats']>;
  close(): Promise<void>;
}

const SIM_BASE = 'http://sim.cacheward.invalid';

export function createSimulator(options: SimulatorOptions = {}): Simulator {
  const faults =
    typeof options.faults === 'string' ? parseFaultRates(options.faults) : (options.faults ?? []);
  const ctx = new SimContext({
    clock: options.clock ?? new OffsetClock(),
    requireApiKey: options.requireApiKey ?? true,
    script: options.script,
    faults,
    seed: options.seed,
    maxBodyBytes: options.maxBodyBytes ?? 32 * 1024 * 1024,
    maxEntries: options.maxEntries,
    anthropicModelOverrides: options.anthropicModelOverrides,
    openaiOverflowPerMinute: options.openaiOverflowPerMinute,
    streamChunkChars: options.streamChunkChars ?? 24,
    zdr: options.zdr ?? false,
  });
  const logger = loggerChannels(
    options.logger,
    lineLogger('cacheward sim', (line) => process.stderr.write(`${line}\n`)),
  );
  const onError = (err: unknown) => logger.error(String(err), err);
  let server: Server | undefined;
  let url: string | undefined;
  // Responses over WebSocket (`wss://…/v1/responses`) once listening: the same route per `response.create`.
  const sockets = new SimWebSocket(ctx, {
    maxPayload: ctx.options.maxBodyBytes,
    onError,
    ...(options.websocketMaxMs !== undefined ? { maxMs: options.websocketMaxMs } : {}),
  });

  // Over HTTP the bridge hands node's request straight to `route`; `fetch` and `handle` wrap a Web Request.
  const route = async (request: SimRequest): Promise<SimReply> => {
    const { path, method } = request;
    try {
      if (method === 'POST' && path === '/v1/messages') return await anthropicRoute(ctx, request, false);
      if (method === 'POST' && path === '/v1/messages/count_tokens')
        return await anthropicRoute(ctx, request, true);
      if (method === 'POST' && path === '/v1/chat/completions')
        return await chatCompletionsRoute(ctx, request);
      if (method === 'POST' && path === '/v1/responses') return await responsesRoute(ctx, request);
      if (path.startsWith('/_sim/')) return await control(ctx, request, path, method);
      const provider: Provider =
        request.headers.has('x-api-key') || request.headers.has('anthropic-version') ? 'anthropic' : 'openai';
      return errorResponse(provider, 404, `Not Found: ${method} ${path}`, ctx.id('req_'));
    } catch (err) {
      onError(err);
      // Shaped as the route's own provider would send it: an OpenAI client never sees an Anthropic body.
      return path.startsWith('/v1/chat/') || path.startsWith('/v1/responses')
        ? errorResponse(
            'openai',
            500,
            'The server had an error while processing your request.',
            ctx.id('req_'),
          )
        : errorResponse('anthropic', 500, 'Internal server error', ctx.id('req_'));
    }
  };
  const handle = async (request: Request): Promise<Response> =>
    toWebResponse(await route(fromWebRequest(request)));

  return {
    fetch: (input, init) =>
      handle(
        new Request(typeof input === 'string' && input.startsWith('/') ? `${SIM_BASE}${input}` : input, init),
      ),
    handle,
    clock: ctx.clock,
    async listen(at: ListenOptions = {}) {
      if (server) throw new AlreadyListeningError('simulator', 'is already listening: close() it first');
      const started = await serve(route, at.port ?? 0, at.host ?? '127.0.0.1', onError);
      server = started.server;
      url = started.url;
      server.on('upgrade', (req, socket, head) => sockets.upgrade(req, socket, head));
      return url;
    },
    get url() {
      if (url === undefined) throw new NotListeningError('simulator');
      return url;
    },
    reset: () => ctx.reset(),
    stats: () => ctx.stats(),
    async close() {
      const s = server;
      server = undefined;
      url = undefined;
      if (!s) return;
      sockets.close();
      s.closeAllConnections();
      await new Promise<void>((resolve) => s.close(() => resolve()));
    },
  };
}

async function control(
  ctx: SimContext,
  request: SimRequest,
  path: string,
  method: string,
): Promise<SimReply> {
  const reply = (status: number, body: unknown) => jsonReply(JSON.stringify(body), status, {});
  if (path === '/_sim/stats' && method === 'GET') return reply(200, ctx.stats());
  if (path === '/_sim/reset' && method === 'POST') {
    ctx.reset();
    return reply(200, { ok: true });
  }
  if (path === '/_sim/clock' && (method === 'POST' || method === 'GET')) {
    if (method === 'POST') {
      let body: unknown;
      try {
        body = JSON.parse((await request.body()).toString('utf8'));
      } catch {
        return reply(400, { error: 'send {"advance_ms": N}' });
      }
      const ms = (body as { advance_ms?: unknown } | null)?.advance_ms;
      if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0)
        return reply(400, { error: 'advance_ms must be a non-negative number' });
      ctx.clock.advance(ms);
    }
    return reply(200, { now: ctx.clock.now(), iso: new Date(ctx.clock.now()).toISOString() });
  }
  return reply(404, {
    error: `unknown control route ${method} ${path}; use GET /_sim/stats, POST /_sim/reset, POST /_sim/clock`,
  });
}
