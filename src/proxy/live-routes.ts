// The live routes: GET /_cacheward/ (the page), /_cacheward/events (server-sent events), /_cacheward/state.
// Same origin only: no CORS headers, a strict Content-Security-Policy, no asset from anywhere else.

import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { renderLivePage } from '../report/live-page.js';
import type { LiveAnalysis } from './live-analysis.js';

/** Serves a live route; returns false when the path is not one. */
export function serveLive(
  path: string,
  req: IncomingMessage,
  res: ServerResponse,
  live: LiveAnalysis,
): boolean {
  if (path === '/_cacheward' || path === '/_cacheward/') {
    if (path === '/_cacheward') {
      res.writeHead(301, { location: '/_cacheward/' });
      res.end();
      return true;
    }
    const nonce = randomBytes(16).toString('base64');
    res.writeHead(200, {
      'content-type': 'text/html; charset=utf-8',
      'cache-control': 'no-store',
      'content-security-policy': `default-src 'none'; script-src 'nonce-${nonce}'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'`,
      'x-content-type-options': 'nosniff',
    });
    res.end(renderLivePage(nonce));
    return true;
  }
  if (path === '/_cacheward/state') {
    res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' });
    res.end(JSON.stringify(live.snapshot()));
    return true;
  }
  if (path === '/_cacheward/events') {
    res.writeHead(200, {
      'content-type': 'text/event-stream',
      'cache-control': 'no-store',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    const send = (event: string, data: unknown) =>
      res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
    send('snapshot', live.snapshot());
    const stop = live.subscribe((row) => send('request', row));
    // A comment line now and then keeps idle connections (and the proxies between) open.
    const keepAlive = setInterval(() => res.write(': keep-alive\n\n'), 15_000);
    keepAlive.unref();
    const end = () => {
      stop();
      clearInterval(keepAlive);
    };
    req.on('close', end);
    res.on('close', end);
    return true;
  }
  return false;
}
