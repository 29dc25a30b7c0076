// The request body on its way upstream: each chunk kept for capture, and handed on one event-loop turn later
// so an upstream's early answer (a 413, a 401) is read before the next write can fail on its closed socket.

import type { IncomingMessage, ServerResponse } from 'node:http';
import { Transform } from 'node:stream';
import { drainRequest } from './request-drain.js';

/**
 * Pipes `req` through a tap into what the upstream client reads. If the upstream stops reading before the
 * body ended (it answered early, or failed), the rest is drained so the client is never left writing.
 */
export function tapRequestBody(req: IncomingMessage, res: ServerResponse, received: Buffer[]): Transform {
  const tap = new Transform({
    transform(chunk: Buffer, _enc, done) {
      received.push(chunk);
      // Reads that arrived with this chunk (the upstream's answer, its reset) are processed first.
      setImmediate(() => done(null, chunk));
    },
  });
  tap.once('close', () => {
    if (!req.complete) drainRequest(req, res);
  });
  return req.pipe(tap);
}
