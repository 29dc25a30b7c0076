// `Expect: 100-continue` (curl sends it above 1 MB): the proxy answers it itself once its own checks pass,
// because the upstream client cannot forward it; the header never goes upstream.

import type { IncomingMessage, RequestListener, Server, ServerResponse } from 'node:http';

/** Requests that wait for `100 Continue` reach `listener` like any other, and are continued by it. */
export function serveExpectContinue(server: Server, listener: RequestListener): void {
  // With a 'checkContinue' listener Node sends nothing itself: the 100 comes from continueIfExpected.
  server.on('checkContinue', listener);
}

/** Whether the client is waiting for `100 Continue` before it sends its body. */
export function awaitsContinue(req: IncomingMessage): boolean {
  return /(^|,)\s*100-continue\s*(,|$)/i.test(String(req.headers.expect ?? ''));
}

/** Tells a waiting client to send its body: call once the request is admitted, before reading the body. */
export function continueIfExpected(req: IncomingMessage, res: ServerResponse): void {
  if (awaitsContinue(req) && !res.headersSent) res.writeContinue();
}
