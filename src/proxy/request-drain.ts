// Reads and drops the rest of a request body once nothing will forward it (an early upstream answer, a
// failure, a local refusal), so a client that writes its whole body before reading gets the answer.

import type { IncomingMessage, ServerResponse } from 'node:http';

/** How much of an unwanted body is read before the connection is closed instead. */
export interface DrainLimits {
  maxBytes: number;
  maxMs: number;
}

/** 64 MB (twice the Messages API's own limit) within 30 s; past either the connection is closed. */
export const DEFAULT_DRAIN: DrainLimits = { maxBytes: 64 * 1024 * 1024, maxMs: 30_000 };

const draining = new WeakSet<IncomingMessage>();

/**
 * Drops what is left of `req`'s body. Past the limits, or if the body will never come (a refused
 * `Expect: 100-continue`), the socket is closed once the response is out; the client then sees a clean
 * end of connection after a whole response, never a hang. Idempotent.
 */
export function drainRequest(
  req: IncomingMessage,
  res: ServerResponse,
  limits: DrainLimits = DEFAULT_DRAIN,
  closeAfter = false,
): void {
  if (closeAfter) {
    res.shouldKeepAlive = false;
    if (!res.headersSent) res.setHeader('connection', 'close');
  }
  if (req.complete || req.destroyed || draining.has(req)) {
    if (closeAfter) closeWhenSent(req, res);
    return;
  }
  draining.add(req);
  let dropped = 0;
  const stop = () => {
    clearTimeout(timer);
    req.off('data', onData);
    res.shouldKeepAlive = false;
    closeWhenSent(req, res);
  };
  const onData = (chunk: Buffer) => {
    dropped += chunk.length;
    if (dropped > limits.maxBytes) stop();
  };
  const timer = setTimeout(stop, limits.maxMs);
  timer.unref();
  req.once('end', () => clearTimeout(timer));
  req.once('close', () => clearTimeout(timer));
  req.unpipe();
  req.on('data', onData);
  req.resume();
  if (closeAfter) closeWhenSent(req, res);
}

function closeWhenSent(req: IncomingMessage, res: ServerResponse): void {
  const close = () => req.socket.end();
  if (res.writableFinished) close();
  else res.once('finish', close);
}
