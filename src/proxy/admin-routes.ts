// The proxy's own routes: GET /_cacheward/health, /_cacheward/metrics and the live page.
// It must never forward anything upstream, nor show a header or body of a captured request.

import type { IncomingMessage, ServerResponse } from 'node:http';
import type { LiveAnalysis } from './live-analysis.js';
import type { LiveEvents } from './live-events.js';
import { serveLive } from './live-routes.js';
import type { ProxyHealth } from './proxy-options.js';

export interface AdminRoutes {
  health(): ProxyHealth;
  /** Prometheus text: the proxy's, the state's and the exporter's counters. */
  metricsText(): string;
  live: LiveAnalysis;
  /** The live page's event streams. */
  events: LiveEvents;
}

/** True when the request was one of the proxy's own routes and has been answered. */
export function serveAdmin(
  path: string,
  method: string,
  _req: IncomingMessage,
  res: ServerResponse,
  routes: AdminRoutes,
): boolean {
  if (path === '/_cacheward/health' && method === 'GET') {
    const h = routes.health();
    res.writeHead(h.status === 'ok' ? 200 : 503, { 'content-type': 'application/json' });
    res.end(JSON.stringify(h));
    return true;
  }
  if (method === 'GET' && serveLive(path, res, routes.live, routes.events)) return true;
  if (path === '/_cacheward/metrics' && method === 'GET') {
    res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' });
    res.end(routes.metricsText());
    return true;
  }
  return false;
}
