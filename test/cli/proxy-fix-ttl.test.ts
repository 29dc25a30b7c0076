// `cacheward proxy --fix ttl --ttl 5m`: the CLI's --ttl is the ttl fix's own option (ttlFix('5m')), and the
// upstream gets that TTL. The built CLI as a child process, a recording upstream on loopback.

import { mkdtempSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { startCliProxy } from '../proxy/cli-proxy.js';

const seen: string[] = [];
const upstream = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    seen.push(Buffer.concat(chunks).toString());
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{"id":"msg_1","type":"message","usage":{"input_tokens":1,"output_tokens":1}}');
  });
});
await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', () => r()));
afterAll(() => upstream.close());

it.each(['5m', '1h'])('--fix ttl --ttl %s sets every breakpoint to that TTL', async (ttl) => {
  seen.length = 0;
  const dir = mkdtempSync(join(tmpdir(), 'cacheward-cli-ttl-'));
  const up = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
  const p = await startCliProxy(['--upstream', up, '--dir', dir, '--fix', 'ttl', '--ttl', ttl, '--quiet']);
  try {
    const health = (await (await fetch(`${p.url}/_cacheward/health`)).json()) as { fixes: string[] };
    expect(health.fixes).toEqual(['ttl']);
    const res = await fetch(`${p.url}/v1/messages`, {
      method: 'POST',
      headers: { 'x-api-key': 'k', 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'claude-opus-5',
        max_tokens: 5,
        system: [
          {
            type: 'text',
            text: 'sys',
            cache_control: { type: 'ephemeral', ttl: ttl === '5m' ? '1h' : '5m' },
          },
        ],
        messages: [{ role: 'user', content: 'hello' }],
      }),
    });
    expect(res.status).toBe(200);
    await res.text();
    expect(JSON.parse(seen[0] ?? '{}').system[0].cache_control.ttl).toBe(ttl);
  } finally {
    p.child.kill('SIGTERM');
    await p.exited;
  }
});
