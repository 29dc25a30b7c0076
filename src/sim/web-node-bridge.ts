// Serves a fetch-style handler (Request → Response) over node:http, streaming the response with
// backpressure. A response stream that errors resets the connection, as a dropped upstream would.

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { requestWithBytes, responseTextOf } from './raw-bodies.js';

export type FetchHandler = (request: Request) => Promise<Response>;

/** Reads a node request into a Web Request; its signal aborts when the client goes away. */
async function toRequest(req: IncomingMessage, res: ServerResponse, base: string): Promise<Request> {
  const controller = new AbortController();
  res.on('close', () => {
    if (!res.writableFinished) controller.abort();
  });
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined) continue;
    for (const v of Array.isArray(value) ? value : [value]) headers.append(name, v);
  }
  let body: Buffer | undefined;
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    body = Buffer.concat(chunks);
  }
  const init = { method: req.method ?? 'GET', headers, signal: controller.signal };
  const url = new URL(req.url ?? '/', base);
  // The bytes ride beside the Request (raw-bodies.ts): no Web stream is built only to be read back whole.
  return body ? requestWithBytes(url, init, body) : new Request(url, init);
}

async function send(response: Response, res: ServerResponse): Promise<void> {
  const headers: Record<string, string> = {};
  response.headers.forEach((v, k) => {
    headers[k] = v;
  });
  const text = responseTextOf(response);
  if (text !== undefined) {
    res.writeHead(response.status, { ...headers, 'content-length': String(Buffer.byteLength(text)) });
    res.end(text);
    return;
  }
  res.writeHead(response.status, headers);
  if (!response.body) {
    res.end();
    return;
  }
  const reader = response.body.getReader();
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
  handler: FetchHandler,
  port: number,
  host: string,
  onError: (err: unknown) => void,
): Promise<{ server: Server; url: string }> {
  let base = `http://${host}`;
  const server = createServer((req, res) => {
    toRequest(req, res, base)
      .then(handler)
      .then((response) => send(response, res))
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
