// `cacheward run --sim`'s guard against the network: a loopback HTTP proxy the agent's HTTP(S)_PROXY points
// at, which refuses every connection (CONNECT or absolute-form) with a message and counts where each went.
// It never opens a connection itself; it binds 127.0.0.1 only.

import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/** Where the agent tried to go, and how often. */
export interface EgressAttempt {
  target: string;
  count: number;
}

export interface EgressGuard {
  /** `http://127.0.0.1:PORT`: what HTTP_PROXY, HTTPS_PROXY and ALL_PROXY are set to. */
  url: string;
  attempts(): EgressAttempt[];
  close(): Promise<void>;
}

const MESSAGE =
  'cacheward run --sim: refused; the agent runs offline, so nothing it sends may leave this machine. ' +
  'It reaches the simulator through ANTHROPIC_BASE_URL or OPENAI_BASE_URL (Codex: the config.toml in its CODEX_HOME).';

/** The proxy environment that sends everything but loopback to the guard. */
export function guardedEnv(guardUrl: string): Record<string, string> {
  const noProxy = '127.0.0.1,localhost,::1';
  return {
    HTTP_PROXY: guardUrl,
    HTTPS_PROXY: guardUrl,
    ALL_PROXY: guardUrl,
    http_proxy: guardUrl,
    https_proxy: guardUrl,
    all_proxy: guardUrl,
    NO_PROXY: noProxy,
    no_proxy: noProxy,
    // Node 24+ reads the proxy variables only when asked to.
    NODE_USE_ENV_PROXY: '1',
  };
}

/** Starts the guard on a free loopback port. */
export async function startEgressGuard(): Promise<EgressGuard> {
  const seen = new Map<string, number>();
  const note = (target: string) => seen.set(target, (seen.get(target) ?? 0) + 1);
  const sockets = new Set<Socket>();
  const server: Server = createServer((req: IncomingMessage, res) => {
    // Absolute-form (`GET http://host/path`): a plain-HTTP request through the proxy.
    let target = req.url ?? '';
    try {
      target = new URL(target).host || target;
    } catch {
      // origin-form: somebody asked the guard itself; still refused
    }
    note(target.slice(0, 200));
    req.resume();
    res.writeHead(403, { 'content-type': 'text/plain', connection: 'close' });
    res.end(`${MESSAGE}\n`);
  });
  server.on('connect', (req: IncomingMessage, socket: Socket) => {
    note(String(req.url ?? '').slice(0, 200));
    socket.on('error', () => {});
    socket.end(
      `HTTP/1.1 403 Forbidden\r\ncontent-type: text/plain\r\nconnection: close\r\ncontent-length: ${Buffer.byteLength(MESSAGE) + 1}\r\n\r\n${MESSAGE}\n`,
    );
  });
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    attempts: () => [...seen].map(([target, count]) => ({ target, count })),
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
