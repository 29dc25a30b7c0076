// The Responses API over WebSocket as OpenAI serves it: each `response.create` is run by the HTTP route
// (caching, scripts, faults, usage) and its stream events sent as text frames; one response at a time.
// It never answers a frame it could not read with silence, and never outlives the connection limit.

import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { createParser } from 'eventsource-parser';
import { type WebSocket, WebSocketServer } from 'ws';
import { isObj } from '../core/json.js';
import { errorBody } from '../wire/provider-errors.js';
import { responsesRoute } from './openai-responses-route.js';
import { ResponseStore } from './response-store.js';
import type { SimContext } from './sim-context.js';
import { TextReply } from './sim-reply.js';
import { type AbortState, routePath, type SimRequest } from './sim-request.js';
import { NodeHeaders } from './web-node-bridge.js';

/** OpenAI closes a Responses WebSocket after 60 minutes. */
export const WEBSOCKET_MAX_MS = 60 * 60_000;

/** The error event OpenAI sends when a socket reached its limit (then it closes the socket). */
export const CONNECTION_LIMIT_CODE = 'websocket_connection_limit_reached';

export interface SimWebSocketOptions {
  /** How long one socket may live (default 60 minutes). */
  maxMs?: number;
  /** Largest frame accepted, in bytes (default the simulator's largest body). */
  maxPayload: number;
  /** Unexpected errors (bugs): the socket is closed with 1011. */
  onError: (err: unknown) => void;
}

/** The simulator's WebSocket endpoint: hand it every `upgrade` of the simulator's HTTP server. */
export class SimWebSocket {
  private readonly server: WebSocketServer;
  private readonly sockets = new Set<WebSocket>();

  constructor(
    private readonly ctx: SimContext,
    private readonly o: SimWebSocketOptions,
  ) {
    this.server = new WebSocketServer({ noServer: true, maxPayload: o.maxPayload });
  }

  /** Answers an upgrade request: 404 off `/v1/responses`, 401 without a key (as OpenAI), else a socket. */
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    const path = routePath((req.url ?? '/').split('?')[0] ?? '/');
    const refuse = (status: number, text: string, message: string) => {
      const body = JSON.stringify(errorBody('openai', status, message, this.ctx.id('req_')));
      socket.end(
        `HTTP/1.1 ${status} ${text}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
      );
    };
    if (path !== '/v1/responses') {
      refuse(404, 'Not Found', `Not Found: WebSocket ${path}`);
      return;
    }
    const headers = new NodeHeaders(req);
    if (this.ctx.options.requireApiKey && !/^Bearer\s+\S/i.test(headers.get('authorization') ?? '')) {
      refuse(
        401,
        'Unauthorized',
        "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
      );
      return;
    }
    this.server.handleUpgrade(req, socket, head, (ws) => this.serve(ws, headers));
  }

  /** Ends every open socket (the simulator is closing). */
  close(): void {
    for (const ws of this.sockets) ws.terminate();
    this.sockets.clear();
  }

  get open(): number {
    return this.sockets.size;
  }

  private serve(ws: WebSocket, headers: NodeHeaders): void {
    this.sockets.add(ws);
    // The connection-local cache: the latest response, chainable even with `store: false`.
    const local = new ResponseStore({ maxResponses: 1 });
    const gone: AbortState = {
      get aborted() {
        return ws.readyState !== ws.OPEN;
      },
    };
    let queue: Promise<void> = Promise.resolve();
    let busy = 0;
    let expired = false;
    const expire = () => {
      if (ws.readyState !== ws.OPEN) return;
      const event = {
        type: 'error',
        status: 400,
        error: {
          type: 'invalid_request_error',
          code: CONNECTION_LIMIT_CODE,
          message:
            'Responses websocket connection limit reached (60 minutes). Create a new websocket connection to continue.',
          param: null,
        },
      };
      ws.send(JSON.stringify(event), () => ws.close(1000, 'connection limit reached'));
    };
    // At the limit an idle socket is closed at once; a busy one right after its response ends.
    const timer = setTimeout(() => {
      expired = true;
      if (busy === 0) expire();
    }, this.o.maxMs ?? WEBSOCKET_MAX_MS);
    timer.unref();
    ws.on('close', () => {
      clearTimeout(timer);
      this.sockets.delete(ws);
    });
    ws.on('error', () => {});
    ws.on('message', (data: Buffer, isBinary: boolean) => {
      busy++;
      // One response at a time, in the order the frames came.
      queue = queue
        .then(() => (expired ? undefined : this.frame(ws, data, isBinary, headers, local, gone)))
        .catch((err) => {
          this.o.onError(err);
          if (ws.readyState === ws.OPEN) ws.close(1011, 'internal error');
        })
        .finally(() => {
          busy--;
          if (expired && busy === 0) expire();
        });
    });
  }

  /** One client frame: a `response.create` runs; anything else is answered with an error event. */
  private async frame(
    ws: WebSocket,
    data: Buffer,
    isBinary: boolean,
    headers: NodeHeaders,
    local: ResponseStore,
    gone: AbortState,
  ): Promise<void> {
    const fail = (status: number, message: string, code: string | null = null) =>
      send(
        ws,
        JSON.stringify(
          wrappedError(status, errorBody('openai', status, message, '', null, code ?? undefined)),
        ),
      );
    let event: unknown;
    try {
      event = isBinary ? undefined : JSON.parse(data.toString('utf8'));
    } catch {
      event = undefined;
    }
    if (!isObj(event)) {
      this.ctx.counters.errors++;
      await fail(400, 'Invalid WebSocket message: expected a JSON object event.', 'invalid_json');
      return;
    }
    if (event.type !== 'response.create') {
      this.ctx.counters.errors++;
      await fail(
        400,
        `Invalid value: '${String(event.type)}'. Supported values are: 'response.create'.`,
        'invalid_value',
      );
      return;
    }
    const request: SimRequest = {
      method: 'POST',
      path: '/v1/responses',
      headers,
      body: async () => data,
      discard: async () => {},
      signal: gone,
      local,
    };
    const reply = await responsesRoute(this.ctx, request, 'websocket');
    if (reply instanceof TextReply) {
      await send(ws, reply.text);
      return;
    }
    if (reply.status === 499) return;
    if (reply.status >= 400 || !reply.body) {
      const body = await reply.json().catch(() => ({}));
      await send(ws, JSON.stringify(wrappedError(reply.status, body)));
      return;
    }
    await streamEvents(ws, reply.body);
  }
}

/** An HTTP error as the WebSocket carries it: an `error` event with the status and the API's error object. */
function wrappedError(status: number, body: unknown): Record<string, unknown> {
  const error = isObj(body) && isObj(body.error) ? body.error : body;
  return { type: 'error', status, error };
}

function send(ws: WebSocket, text: string): Promise<void> {
  if (ws.readyState !== ws.OPEN) return Promise.resolve();
  return new Promise((resolve) => ws.send(text, () => resolve()));
}

/** Sends each SSE event's data as one text frame; a stream that breaks (a reset fault) drops the socket. */
async function streamEvents(ws: WebSocket, body: ReadableStream<Uint8Array>): Promise<void> {
  const frames: string[] = [];
  const parser = createParser({ onEvent: (e) => frames.push(e.data) });
  const decoder = new TextDecoder();
  const reader = body.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      parser.feed(decoder.decode(value, { stream: true }));
      for (const f of frames.splice(0)) await send(ws, f);
      if (ws.readyState !== ws.OPEN) {
        await reader.cancel().catch(() => {});
        return;
      }
    }
  } catch {
    ws.terminate();
  }
}
