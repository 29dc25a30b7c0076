// The floor for a proxy that must hold the whole request before it forwards it (as --fix does): a bare Node
// hop that reads the body to its end, then sends it upstream in one write; the response is piped back.
// Bench-only; it must never parse, log or store anything. Usage: node bench/bare-buffered-proxy.mjs <upstream-url>

import { Agent, createServer, request } from 'node:http';

const upstream = new URL(process.argv[2] ?? 'http://127.0.0.1:8080');
const agent = new Agent({ keepAlive: true, maxSockets: 256 });

const server = createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks);
    const headers = { ...req.headers, host: upstream.host, 'content-length': String(body.length) };
    delete headers['transfer-encoding'];
    const up = request(
      { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers, agent },
      (upRes) => {
        res.writeHead(upRes.statusCode ?? 502, upRes.headers);
        upRes.pipe(res);
      },
    );
    up.on('error', () => res.destroy());
    up.end(body);
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  process.stdout.write(`bare buffered proxy on http://127.0.0.1:${address.port}\n`);
});
process.on('SIGTERM', () => process.exit(0));
