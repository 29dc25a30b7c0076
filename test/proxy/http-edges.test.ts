import { mkdtempSync } from 'node:fs';
import { createServer, request as httpRequest, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, describe, expect, it } from 'vitest';
import { type CachewardProxy, createProxy, type ProxyOptions } from '../../src/proxy/create-proxy.js';
import { createSimulator } from '../../src/sim/simulator.js';
import { messagesBody } from '../sim/helpers.js';
import { API_KEY, listenOnLoopback } from './helpers.js';
import { postHead, RawConnection } from './raw-http.js';

type Json = Record<string, unknown>;
const dir = () => join(mkdtempSync(join(tmpdir(), 'cacheward-edges-')), 'captures');
const closers: Array<() => Promise<unknown>> = [];
afterAll(async () => {
  for (const c of closers.reverse()) await c();
});

async function proxy(options: Partial<ProxyOptions>): Promise<CachewardProxy> {
  const p = createProxy({ dir: dir(), logger: {}, ...options });
  await p.listen();
  closers.push(() => p.close());
  return p;
}

const listen = (server: Server) => listenOnLoopback(server, closers);

const sim = createSimulator();
const simUrl = await sim.listen();
closers.push(() => sim.close());
const hostOf = (url: string) => new URL(url).host;
const body = Buffer.from(JSON.stringify(messagesBody(3, 200)));
const big = Buffer.alloc(16 * 1024 * 1024, 0x20);

describe('a client that sends the whole body before reading (Python requests, http.client)', () => {
  it('gets the 502 of an unreachable upstream, and its keep-alive connection still works or is closed cleanly', async () => {
    const p = await proxy({ upstream: 'http://127.0.0.1:9' });
    const conn = await RawConnection.open(p.url);
    try {
      await conn.writeWhole(postHead('/v1/messages', hostOf(p.url), big.length), big);
      const first = await conn.readResponse();
      expect(first.status).toBe(502);
      expect(((JSON.parse(first.body.toString()) as Json).error as Json).message).toMatch(
        /could not reach the upstream/,
      );
      if (first.headers.connection === 'close') {
        await conn.whenClosed();
        expect(conn.closed).toBe(true);
      } else {
        await conn.writeWhole(`GET /_cacheward/health HTTP/1.1\r\nhost: ${hostOf(p.url)}\r\n\r\n`);
        expect((await conn.readResponse()).status).toBe(200);
      }
    } finally {
      conn.close();
    }
  });

  it('gets an upstream early answer (it stopped reading) rather than a hang', async () => {
    const upstream = createServer((_req, res) => {
      res.writeHead(401, { 'content-type': 'application/json' });
      res.end('{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}');
    });
    const p = await proxy({ upstream: await listen(upstream) });
    const conn = await RawConnection.open(p.url);
    try {
      await conn.writeWhole(postHead('/v1/messages', hostOf(p.url), big.length), big);
      const res = await conn.readResponse();
      expect(res.status).toBe(401);
      expect(res.body.toString()).toContain('invalid x-api-key');
    } finally {
      conn.close();
    }
  });
});

describe('upstream answers that arrive before the body is sent', () => {
  it("passes an upstream's early 413 through, never a 502", async () => {
    const upstream = createServer((_req, res) => {
      res.writeHead(413, { 'content-type': 'application/json', connection: 'close' });
      res.end(
        '{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum size"}}',
      );
    });
    const p = await proxy({ upstream: await listen(upstream) });
    const payload = Buffer.alloc(4 * 1024 * 1024, 0x20);
    const statuses: number[] = [];
    for (let i = 0; i < 20; i++) {
      const res = await fetch(`${p.url}/v1/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': API_KEY },
        body: payload,
      });
      statuses.push(res.status);
      expect(await res.text()).toContain('request_too_large');
    }
    expect(statuses).toEqual(Array(20).fill(413));
    expect(p.metrics()).not.toMatch(/cacheward_upstream_errors_total\{/);
  });
});

describe('Expect: 100-continue (curl sends it above 1 MB)', () => {
  it('answers 100 Continue, then forwards the body and the upstream answer', async () => {
    const p = await proxy({ upstream: simUrl });
    const conn = await RawConnection.open(p.url);
    try {
      await conn.writeWhole(postHead('/v1/messages', hostOf(p.url), body.length, { expect: '100-continue' }));
      expect((await conn.readResponse()).status).toBe(100);
      await conn.writeWhole('', body);
      const res = await conn.readResponse();
      expect(res.status).toBe(200);
      expect((JSON.parse(res.body.toString()) as Json).type).toBe('message');
    } finally {
      conn.close();
    }
  });

  it('works from node:http, which waits for the 100 before sending', async () => {
    const p = await proxy({ upstream: simUrl });
    const status = await new Promise<number>((resolve, reject) => {
      const req = httpRequest(`${p.url}/v1/messages`, {
        method: 'POST',
        headers: {
          expect: '100-continue',
          'content-type': 'application/json',
          'content-length': body.length,
          'x-api-key': API_KEY,
        },
      });
      req.on('continue', () => req.end(body));
      req.on('response', (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on('error', reject);
    });
    expect(status).toBe(200);
  });
});

describe('requests the proxy refuses itself', () => {
  it('refuses an absolute-form target with 400, forwards nothing, and counts no upstream error', async () => {
    const p = await proxy({ upstream: simUrl });
    const before = sim.stats().requests;
    const conn = await RawConnection.open(p.url);
    try {
      await conn.writeWhole(postHead('http://other.example/v1/messages', hostOf(p.url), body.length), body);
      const res = await conn.readResponse();
      expect(res.status).toBe(400);
      const message = ((JSON.parse(res.body.toString()) as Json).error as Json).message as string;
      expect(message).toMatch(/absolute-form/);
      expect(message).not.toMatch(/upstream/);
    } finally {
      conn.close();
    }
    expect(sim.stats().requests).toBe(before);
    expect(p.metrics()).not.toMatch(/cacheward_upstream_errors_total\{/);
    expect(p.metrics()).toMatch(/cacheward_refused_total\{reason="absolute_form"\} 1/);
  });

  it('refuses a Host that is not a loopback name or a configured one (DNS rebinding)', async () => {
    const p = await proxy({ upstream: simUrl, allowedHosts: ['proxy.lan'] });
    const port = new URL(p.url).port;
    const get = async (host: string, path = '/_cacheward/health') => {
      const conn = await RawConnection.open(p.url);
      try {
        await conn.writeWhole(`GET ${path} HTTP/1.1\r\nhost: ${host}\r\n\r\n`);
        return await conn.readResponse();
      } finally {
        conn.close();
      }
    };
    const evil = await get(`rebind.attacker.example:${port}`);
    expect(evil.status).toBe(403);
    expect(evil.body.toString()).not.toContain(simUrl);
    expect(((JSON.parse(evil.body.toString()) as Json).error as Json).message).toMatch(
      /Host "rebind\.attacker\.example" is not allowed.*--allow-host/,
    );
    for (const ok of [
      `127.0.0.1:${port}`,
      `localhost:${port}`,
      `[::1]:${port}`,
      'proxy.lan',
      `app.localhost:${port}`,
    ])
      expect((await get(ok)).status, ok).toBe(200);
    const before = sim.stats().requests;
    const conn = await RawConnection.open(p.url);
    await conn.writeWhole(postHead('/v1/messages', `evil.example:${port}`, body.length), body);
    expect((await conn.readResponse()).status).toBe(403);
    conn.close();
    expect(sim.stats().requests).toBe(before);
    expect(p.metrics()).not.toMatch(/cacheward_upstream_errors_total\{/);
  });

  it('still serves the SDKs on 127.0.0.1 and localhost', async () => {
    const p = await proxy({ upstream: simUrl });
    for (const base of [p.url, p.url.replace('127.0.0.1', 'localhost')]) {
      const client = new Anthropic({ apiKey: API_KEY, baseURL: base, maxRetries: 0 });
      expect((await client.messages.create(messagesBody(3, 200) as never)).type).toBe('message');
    }
  });
});
