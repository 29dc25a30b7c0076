// The request body on its way upstream: each chunk kept for capture as it passes. If the upstream stops
// reading before the body ended (it answered early, or failed), the rest is drained so the client is not left writing.

import type { IncomingMessage, ServerResponse } from 'node:http';
import { Transform } from 'node:stream';
import { drainRequest } from './request-drain.js';

/** Pipes `req` through a tap into what the upstream client reads. */
export function tapRequestBody(req: IncomingMessage, res: ServerResponse, received: Buffer[]): Transform {
  const tap = new Transform({
    transform(chunk: Buffer, _enc, done) {
      received.push(chunk);
      done(null, chunk);
    },
  });
  tap.once('close', () => {
    if (!req.complete) drainRequest(req, res);
  });
  return req.pipe(tap);
}
