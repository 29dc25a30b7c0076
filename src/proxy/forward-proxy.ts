// The HTTPS forward-proxy mode: answers CONNECT; the provider API hosts are opened with a certificate from
// the local CA and their requests served by the same handler as base-URL mode; every other CONNECT is a
// byte-for-byte tunnel, never read and never given a certificate.

import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { createServer } from 'node:http';
import { isIP, connect as netConnect, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { TLSSocket } from 'node:tls';
import { sameToken } from './admission.js';
import { LocalCa } from './local-ca.js';
import type { ProxyMetrics } from './proxy-metrics.js';

/** The hosts opened by default: the Anthropic and OpenAI API hosts. */
export const PROVIDER_HOSTS = ['api.anthropic.com', 'api.openai.com'] as const;

/** Which tunnels are made: to any host, or (`cacheward run --sim`, which never reaches the network) loopback only. */
export type TunnelPolicy = 'any' | 'loopback';

/** Serves one request (or upgrade) of an opened host, with that host's upstreams. */
export interface OpenedHostServer {
  request(req: IncomingMessage, res: ServerResponse): void;
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void;
}

export interface ForwardProxyOptions {
  ca: LocalCa;
  /** Lower-case host names whose CONNECT is opened. */
  openHosts: ReadonlySet<string>;
  tunnel: TunnelPolicy;
  /** When set, CONNECT needs it (Proxy-Authorization Basic with it as the password, or x-cacheward-token). */
  token?: string | undefined;
  metrics: ProxyMetrics;
  /** The server for an opened `host:port` (made once per target). `origin` is `https://host[:port]`. */
  serverFor(origin: string): OpenedHostServer;
  /** Where the proxy says what went wrong (a client that does not trust the CA, a tunnel that failed). */
  warn(line: string): void;
}

const ESTABLISHED = 'HTTP/1.1 200 Connection Established\r\n\r\n';

/** `host:port` of a CONNECT target, or undefined when it is not one. */
export function connectTarget(url: string | undefined): { host: string; port: number } | undefined {
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^\s:/?#@[\]]+)):(\d{1,5})$/.exec(url ?? '');
  if (!m) return undefined;
  const port = Number(m[3]);
  if (port < 1 || port > 65535) return undefined;
  return { host: (m[1] ?? m[2] ?? '').toLowerCase().replace(/\.$/, ''), port };
}

function isLoopback(host: string): boolean {
  if (host === 'localhost' || host.endsWith('.localhost')) return true;
  if (isIP(host) === 4) return host.startsWith('127.');
  return host === '::1';
}

export class ForwardProxy {
  private readonly servers = new Map<string, Server>();
  private readonly sockets = new Set<Duplex>();
  /** TLS connections of opened hosts that carried a request (the others may be a client distrusting the CA). */
  private readonly used = new WeakSet<object>();
  private readonly warned = new Map<string, number>();
  private readonly counts = { opened: 0, tunneled: 0, refused: 0 };

  constructor(private readonly o: ForwardProxyOptions) {}

  /** Handles a `connect` event of the proxy's server. */
  connect(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    socket.on('error', () => {});
    this.track(socket);
    const target = connectTarget(req.url);
    if (!target) {
      this.refuse(
        socket,
        400,
        'Bad Request',
        `cacheward proxy: CONNECT needs host:port, got "${String(req.url).slice(0, 100)}"`,
      );
      return;
    }
    if (!this.authorized(req)) {
      this.refuse(
        socket,
        407,
        'Proxy Authentication Required',
        'cacheward proxy: CONNECT needs the token: put it in the proxy URL (http://cacheward:TOKEN@HOST:PORT) or send x-cacheward-token',
        'proxy-authenticate: Basic realm="cacheward"\r\n',
      );
      return;
    }
    if (this.o.openHosts.has(target.host)) this.open(target.host, target.port, socket, head);
    else this.tunnel(target.host, target.port, socket, head);
  }

  /** Ends every tunnel and opened connection (the proxy is closing). */
  close(): void {
    for (const s of this.sockets) s.destroy();
    for (const server of this.servers.values()) server.closeAllConnections();
  }

  /** Prometheus lines: CONNECTs by what was done with them. */
  metricsText(): string {
    const lines = [
      '# HELP cacheward_connect_total CONNECT requests: opened (a provider host, decrypted), tunneled, refused.',
      '# TYPE cacheward_connect_total counter',
    ];
    for (const [k, v] of Object.entries(this.counts))
      lines.push(`cacheward_connect_total{result="${k}"} ${v}`);
    return `${lines.join('\n')}\n`;
  }

  private track(socket: Duplex): void {
    this.sockets.add(socket);
    socket.once('close', () => this.sockets.delete(socket));
  }

  private authorized(req: IncomingMessage): boolean {
    if (!this.o.token) return true;
    const token = Buffer.from(this.o.token);
    if (sameToken(req.headers['x-cacheward-token'], token)) return true;
    const basic = /^Basic\s+(\S+)$/i.exec(String(req.headers['proxy-authorization'] ?? ''))?.[1];
    if (!basic) return false;
    const decoded = Buffer.from(basic, 'base64').toString('utf8');
    return sameToken(decoded.slice(decoded.indexOf(':') + 1), token);
  }

  private refuse(socket: Duplex, status: number, text: string, message: string, extra = ''): void {
    this.counts.refused++;
    const body = `${message}\n`;
    socket.end(
      `HTTP/1.1 ${status} ${text}\r\n${extra}content-type: text/plain; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
    );
  }

  /** A provider host: TLS ends here with the CA's certificate for it; its requests go to the handler. */
  private open(host: string, port: number, socket: Duplex, head: Buffer): void {
    this.counts.opened++;
    const origin = `https://${host.includes(':') ? `[${host}]` : host}${port === 443 ? '' : `:${port}`}`;
    let server = this.servers.get(origin);
    if (!server) {
      const s = this.o.serverFor(origin);
      server = createServer((req, res) => {
        this.used.add(req.socket);
        s.request(req, res);
      });
      server.on('upgrade', (req: IncomingMessage, sock: Duplex, h: Buffer) => {
        this.used.add(req.socket);
        s.upgrade(req, sock, h);
      });
      server.keepAliveTimeout = 65_000;
      server.requestTimeout = 0;
      this.servers.set(origin, server);
    }
    socket.write(ESTABLISHED);
    if (head.length) socket.unshift(head);
    const tls = new TLSSocket(socket as Socket, {
      isServer: true,
      secureContext: this.o.ca.contextFor(host),
      ALPNProtocols: ['http/1.1'],
    });
    this.track(tls);
    let secured = false;
    let failure: string | undefined;
    tls.once('secure', () => {
      secured = true;
    });
    tls.on('error', (err) => {
      failure ??= err.message;
    });
    tls.once('close', () => {
      if (!this.used.has(tls)) this.distrusted(host, secured, failure);
    });
    server.emit('connection', tls);
  }

  /**
   * A TLS connection to an opened host that ended without a request: the client most likely refused the
   * CA's certificate. Said once a minute per host, with the fix.
   */
  private distrusted(host: string, secured: boolean, failure: string | undefined): void {
    const now = Date.now();
    if ((this.warned.get(host) ?? 0) > now - 60_000) return;
    this.warned.set(host, now);
    const what = failure
      ? `the TLS handshake failed (${failure})`
      : secured
        ? 'it closed the connection right after the TLS handshake, without a request'
        : 'it closed the connection during the TLS handshake';
    this.o.warn(
      `a client opened ${host} through the forward proxy but ${what}: it most likely does not trust cacheward's local CA. Trust it: NODE_EXTRA_CA_CERTS=${this.o.ca.certPath} for Node and Claude Code, or add that file to the system store (\`cacheward ca\` says how)`,
    );
  }

  /** Any other host: a TCP tunnel, bytes copied both ways unread. */
  private tunnel(host: string, port: number, socket: Duplex, head: Buffer): void {
    if (this.o.tunnel === 'loopback' && !isLoopback(host)) {
      this.refuse(
        socket,
        403,
        'Forbidden',
        `cacheward proxy: CONNECT ${host}:${port} refused: with --sim nothing reaches the network (only loopback hosts are tunneled)`,
      );
      return;
    }
    this.counts.tunneled++;
    const upstream = netConnect({ host, port });
    this.track(upstream);
    let connected = false;
    upstream.once('connect', () => {
      connected = true;
      socket.write(ESTABLISHED);
      if (head.length) upstream.write(head);
      upstream.pipe(socket);
      socket.pipe(upstream);
    });
    upstream.on('error', (err) => {
      if (!connected) {
        this.counts.tunneled--;
        this.refuse(
          socket,
          502,
          'Bad Gateway',
          `cacheward proxy: could not reach ${host}:${port}: ${err.message}`,
        );
      } else socket.destroy();
    });
    socket.once('close', () => upstream.destroy());
    upstream.once('close', () => socket.destroy());
  }
}

/** `ProxyOptions.forward` as an object. */
export interface ForwardOptions {
  /** Host names opened besides the provider API hosts (`--open-host`). */
  openHosts?: readonly string[];
  /** The CA's folder (default `ca/` in the state folder). */
  caDir?: string;
  /** `loopback`: tunnel only to loopback hosts (`cacheward run --sim`). Default `any`. */
  tunnel?: TunnelPolicy;
}

/** The forward options with their defaults, the CA opened (created on first use). */
export function forwardSettings(forward: true | ForwardOptions): {
  ca: LocalCa;
  openHosts: Set<string>;
  tunnel: TunnelPolicy;
} {
  const f = forward === true ? {} : forward;
  const ca = LocalCa.open(f.caDir ? { dir: f.caDir } : {});
  const openHosts = new Set(
    [...PROVIDER_HOSTS, ...(f.openHosts ?? [])].map((h) => h.trim().toLowerCase()).filter(Boolean),
  );
  // Their certificates now, before the proxy listens: made on the first CONNECT, the key and signature
  // (0.1 to 0.6 s, synchronous) would hold up every other client then.
  for (const host of openHosts) ca.contextFor(host);
  return { ca, openHosts, tunnel: f.tunnel ?? 'any' };
}
