// The live routes: GET /_cacheward/ (the page), /_cacheward/events (server-sent events), /_cacheward/state.
// Same origin only: no CORS headers, a strict Content-Security-Policy, no asset from anywhere else; every
// subscriber's buffer bounded (live-events.ts).

import { randomBytes } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { renderLivePage } from '../report/live-page.js';
import type { LiveAnalysis } from './live-analysis.js';
import type { LiveEvents } from './live-events.js';

/** Serves a live route; returns false when the path is not one. */
export function serveLive(
  path: string,
  res: ServerResponse,
  live: LiveAnalysis,
  events: LiveEvents,
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
    events.serve(res);
    return true;
  }
  return false;
}
