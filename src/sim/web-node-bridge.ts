// Serves the simulator's handler over node:http: requests read straight from node (no Web Request per
// request), text replies written as is, Web Response streams with backpressure. A stream that errors resets
// the connection, as a dropped upstream would.

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type SimReply, TextReply } from './sim-reply.js';
import { type AbortState, type HeaderReader, routePath, type SimRequest } from './sim-request.js';

export type SimHandler = (request: SimRequest) => Promise<SimReply>;

/** node's lower-cased headers, every repeat kept (`headersDistinct`), read as Web Headers would join them. */
export class NodeHeaders implements HeaderReader {
  constructor(private readonly req: IncomingMessage) {}
  get(name: string): string | null {
    const key = name.toLowerCase();
    const one = this.req.headers[key];
    if (one === undefined) return null;
    // A header node folds to its first value (e.g. authorization) is kept whole, as Web Headers keep it.
    const all = this.req.headersDistinct[key];
    return all && all.length > 1 ? all.join(', ') : Array.isArray(one) ? one.join(', ') : one;
  }
  has(name: string): boolean {
    return this.req.headers[name.toLowerCase()] !== undefined;
  }
}

/** The client left before the whole response was written. */
class ResponseGone implements AbortState {
  constructor(private readonly res: ServerResponse) {}
  get aborted(): boolean {
    return this.res.closed && !this.res.writableFinished;
  }
}

/** A path that `new URL` would spell the same (no dots, escapes or query): most requests' paths. */
const PLAIN_PATH = /^\/(?!\/)[A-Za-z0-9_/-]*$/;

function readBody(req: IncomingMessage): Promise<Buffer> {
  if (req.method === 'GET' || req.method === 'HEAD') return Promise.resolve(Buffer.alloc(0));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.once('end', () => resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks)));
    req.once('error', reject);
    req.once('close', () => {
      if (!req.complete) reject(new Error('the client closed the connection before the body ended'));
    });
  });
}

function simRequest(req: IncomingMessage, res: ServerResponse, base: string): SimRequest {
  const url = req.url ?? '/';
  return {
    method: (req.method ?? 'GET').toUpperCase(),
    path: routePath(PLAIN_PATH.test(url) ? url : new URL(url, base).pathname),
    headers: new NodeHeaders(req),
    body: () => readBody(req),
    discard: async () => {
      req.resume();
    },
    signal: new ResponseGone(res),
  };
}

async function send(reply: SimReply, res: ServerResponse): Promise<void> {
  if (reply instanceof TextReply) {
    res.writeHead(reply.status, {
      ...reply.headers,
      'content-length': String(Buffer.byteLength(reply.text)),
    });
    res.end(reply.text);
    return;
  }
  const headers: Record<string, string> = {};
  reply.headers.forEach((v, k) => {
    headers[k] = v;
  });
  res.writeHead(reply.status, headers);
  if (!reply.body) {
    res.end();
    return;
  }
  const reader = reply.body.getReader();
  res.on('close', () => {
    if (!res.writableFinished) reader.cancel().catch(() => {});
  });
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      // Wait until each chunk has left the process: the client then holds everything sent before a reset.
      await new Promise<void>((resolve) => res.write(value, () => resolve()));
      if (res.destroyed) return;
    }
    res.end();
  } catch {
    // The body failed mid-way (a simulated reset, or an upstream that dropped): reset the connection.
    const socket = res.socket;
    if (socket && typeof socket.resetAndDestroy === 'function') socket.resetAndDestroy();
    else res.destroy();
  }
}

/** An HTTP server bound to `host` serving `handler`; resolves once listening, with its base URL. */
export async function serve(
  handler: SimHandler,
  port: number,
  host: string,
  onError: (err: unknown) => void,
): Promise<{ server: Server; url: string }> {
  let base = `http://${host}`;
  const server = createServer((req, res) => {
    handler(simRequest(req, res, base))
      .then((reply) => send(reply, res))
      .catch((err) => {
        onError(err);
        if (!res.headersSent) {
          res.writeHead(500, { 'content-type': 'application/json' });
          res.end(
            JSON.stringify({ type: 'error', error: { type: 'api_error', message: 'Internal server error' } }),
          );
        } else res.destroy();
      });
  });
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  base = `http://${host.includes(':') ? `[${host}]` : host}:${address.port}`;
  return { server, url: base };
}
