// The HTTP side of `cacheward watch`: the proxy's own live page, events, state and metrics routes, behind the
// proxy's admission (Host and browser-origin checks), on loopback. It serves nothing else and forwards nothing.

import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Admission } from '../proxy/admission.js';
import { HostCheck } from '../proxy/host-check.js';
import type { LiveAnalysis } from '../proxy/live-analysis.js';
import type { LiveEvents } from '../proxy/live-events.js';
import { serveLive } from '../proxy/live-routes.js';
import { OriginCheck } from '../proxy/origin-check.js';
import type { ProxyMetrics } from '../proxy/proxy-metrics.js';

/** Where `cacheward watch` listens: loopback only. */
export const WATCH_HOST = '127.0.0.1';

export interface WatchServerOptions {
  /** 0 = any free port. */
  port: number;
  /** Host names to answer besides localhost and IP literals (`--allow-host`). */
  allowedHosts?: readonly string[];
  live: LiveAnalysis;
  events: LiveEvents;
  metrics: ProxyMetrics;
  /** The body of `GET /_cacheward/health`. */
  health: () => unknown;
}

export interface WatchServer {
  url: string;
  close(): Promise<void>;
}

export async function listenWatchServer(o: WatchServerOptions): Promise<WatchServer> {
  const admission = new Admission({
    hosts: new HostCheck([...(o.allowedHosts ?? []), WATCH_HOST]),
    origins: new OriginCheck(),
    metrics: o.metrics,
  });
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    const method = (req.method ?? 'GET').toUpperCase();
    if (!admission.admit(req, res, 'anthropic', `cw_${randomBytes(5).toString('hex')}`)) return;
    if (method !== 'GET') {
      res.writeHead(405, { allow: 'GET', 'content-type': 'text/plain; charset=utf-8' });
      res.end('cacheward watch: only GET is served here (it reads transcripts; it forwards nothing)\n');
      return;
    }
    if (path === '/') {
      res.writeHead(302, { location: '/_cacheward/' });
      res.end();
      return;
    }
    if (path === '/_cacheward/health') {
      res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' });
      res.end(JSON.stringify(o.health()));
      return;
    }
    if (path === '/_cacheward/metrics') {
      res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' });
      res.end(o.metrics.render() + o.events.metricsText());
      return;
    }
    if (serveLive(path, res, o.live, o.events)) return;
    res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' });
    res.end('cacheward watch: not found; the live page is at /_cacheward/\n');
  });
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(o.port, WATCH_HOST, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${WATCH_HOST}:${port}`,
    async close() {
      o.events.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
