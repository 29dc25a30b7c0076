// The floor for bench/proxy.ts: a bare Node pass-through proxy (the request piped to the upstream, the
// response piped back, nothing else). Bench-only; it must never parse, log or store anything.
// Usage: node bench/bare-proxy.mjs <upstream-url>   (prints its loopback URL)

import { Agent, createServer, request } from 'node:http';

const upstream = new URL(process.argv[2] ?? 'http://127.0.0.1:8080');
const agent = new Agent({ keepAlive: true, maxSockets: 256 });

const server = createServer((req, res) => {
  const up = request(
    {
      host: upstream.hostname,
      port: upstream.port,
      method: req.method,
      path: req.url,
      headers: { ...req.headers, host: upstream.host },
      agent,
    },
    (upRes) => {
      res.writeHead(upRes.statusCode ?? 502, upRes.headers);
      upRes.pipe(res);
    },
  );
  up.on('error', () => res.destroy());
  req.pipe(up);
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  process.stdout.write(`bare proxy on http://127.0.0.1:${address.port}\n`);
});
process.on('SIGTERM', () => process.exit(0));
