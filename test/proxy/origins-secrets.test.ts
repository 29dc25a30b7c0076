// Browsers and secrets: a page on another site cannot send through the proxy (a provider-shaped 403, nothing
// reaches the upstream) while SDKs, curl and agents are unaffected; credentials in any URL the proxy is given
// never show on the health endpoint, in its log or in its errors.

import { mkdtempSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import { redactUrl } from '../../src/core/redact-url.js';
import { createProxy, ProxyConfigError } from '../../src/proxy/create-proxy.js';
import { createSimulator } from '../../src/sim/simulator.js';
import { cli } from '../cli/run-cli.js';
import { launchChromium } from '../headless-chromium.js';
import { messagesBody } from '../sim/helpers.js';
import { startOtlpReceiver } from '../telemetry/otlp-receiver.js';
import { startCliProxy } from './cli-proxy.js';
import { API_KEY, startProxy } from './helpers.js';

type Json = Record<string, unknown>;
const body = JSON.stringify(messagesBody(2, 40));
const chat = JSON.stringify({ model: 'gpt-5.4', messages: [{ role: 'user', content: 'hi' }] });

describe('browser requests from another site', () => {
  const harness = startProxy({ capture: 'off', allowedOrigins: ['http://localhost:5173'] });

  async function post(path: string, headers: Record<string, string>, payload = body) {
    const h = await harness;
    const res = await request(`${h.proxy.url}${path}`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-api-key': API_KEY,
        authorization: `Bearer ${API_KEY}`,
        ...headers,
      },
      body: payload,
    });
    return { status: res.statusCode, json: (await res.body.json()) as Json };
  }

  it('refuses a foreign Origin or Sec-Fetch-Site: cross-site with a provider-shaped 403, before the upstream', async () => {
    const h = await harness;
    const before = h.sim.stats().requests;
    const evil = await post('/v1/messages', { origin: 'https://evil.example' });
    expect(evil.status).toBe(403);
    expect(evil.json).toMatchObject({ type: 'error', error: { type: 'permission_error' } });
    expect((evil.json.error as Json).message).toMatch(
      /a web page on https:\/\/evil\.example may not send requests through this proxy.*--allow-origin https:\/\/evil\.example/,
    );
    const openai = await post('/v1/chat/completions', { origin: 'null' }, chat);
    expect(openai.status).toBe(403);
    expect(openai.json).toMatchObject({ error: { type: 'invalid_request_error', code: 'cacheward_origin' } });
    // A same-site page on another port of this machine is another origin too.
    const port = await post('/v1/messages', { origin: 'http://127.0.0.1:1', 'sec-fetch-site': 'same-site' });
    expect(port.status).toBe(403);
    const noOrigin = await post('/v1/messages', {
      'sec-fetch-site': 'cross-site',
      'sec-fetch-mode': 'no-cors',
    });
    expect(noOrigin.status).toBe(403);
    expect((noOrigin.json.error as Json).message).toMatch(/cross-site browser request without an Origin/);
    // A cross-site form posted as a navigation is no exception.
    const form = await post('/v1/messages', { 'sec-fetch-site': 'cross-site', 'sec-fetch-mode': 'navigate' });
    expect(form.status).toBe(403);
    expect(h.sim.stats().requests).toBe(before);
    expect(h.proxy.metrics()).toMatch(/cacheward_refused_total\{reason="origin"\} 5/);
  });

  it('serves SDKs, curl, agents, its own page and an allowed origin as before', async () => {
    const h = await harness;
    const own = new URL(h.proxy.url).origin;
    const shapes: Array<Record<string, string>> = [
      {},
      { 'sec-fetch-site': 'none' },
      { 'sec-fetch-site': 'same-origin', origin: own },
      { origin: own.replace('http:', 'https:') },
      // Claude Code and the SDK's dangerouslyAllowBrowser send this header and no Origin.
      { 'anthropic-dangerous-direct-browser-access': 'true' },
      { origin: 'http://localhost:5173', 'sec-fetch-site': 'cross-site' },
    ];
    for (const headers of shapes)
      expect((await post('/v1/messages', headers)).status, JSON.stringify(headers)).toBe(200);
    const sdk = new Anthropic({
      apiKey: API_KEY,
      baseURL: h.proxy.url,
      maxRetries: 0,
      dangerouslyAllowBrowser: true,
    });
    expect((await sdk.messages.create(messagesBody(2, 40) as never)).type).toBe('message');
    // A link from another site opens the live page; a script on that site cannot fetch its state.
    const nav = await request(`${h.proxy.url}/_cacheward/`, {
      headers: { 'sec-fetch-site': 'cross-site', 'sec-fetch-mode': 'navigate' },
    });
    expect(nav.statusCode).toBe(200);
    await nav.body.text();
    const state = await request(`${h.proxy.url}/_cacheward/state`, {
      headers: { 'sec-fetch-site': 'cross-site', 'sec-fetch-mode': 'cors', origin: 'https://evil.example' },
    });
    expect(state.statusCode).toBe(403);
    await state.body.text();
  });

  it('a page in headless Chromium on another origin cannot make the browser send through it', async () => {
    const sim = createSimulator({ requireApiKey: false });
    const simUrl = await sim.listen();
    const proxy = createProxy({
      upstream: simUrl,
      capture: 'off',
      dir: mkdtempSync(join(tmpdir(), 'cw-o-')),
      logger: {},
    });
    await proxy.listen();
    // The page an attacker serves: it posts to the proxy with no-cors (no preflight) and with CORS.
    const page = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<!doctype html><title>elsewhere</title>');
    });
    await new Promise<void>((r) => page.listen(0, '127.0.0.1', () => r()));
    const pageUrl = `http://localhost:${(page.address() as AddressInfo).port}/`;
    const browser = await launchChromium();
    try {
      const tab = await browser.newPage();
      await tab.goto(pageUrl);
      const outcome = await tab.evaluate(
        async ([url, payload]) => {
          const a = await fetch(`${url}/v1/messages`, {
            method: 'POST',
            mode: 'no-cors',
            headers: { 'content-type': 'text/plain' },
            body: payload,
          }).then(
            (r) => r.type,
            (e) => String(e),
          );
          const b = await fetch(`${url}/v1/messages`, {
            method: 'POST',
            headers: {
              'content-type': 'application/json',
              'x-api-key': 'k',
              'anthropic-version': '2023-06-01',
            },
            body: payload,
          }).then(
            (r) => String(r.status),
            (e) => String(e),
          );
          return [a, b];
        },
        [proxy.url, body] as const,
      );
      expect(outcome[0]).toBe('opaque');
      expect(outcome[1]).toMatch(/TypeError/);
      expect(sim.stats().requests).toBe(0);
      expect(proxy.metrics()).toMatch(/cacheward_refused_total\{reason="origin"\} 2/);
    } finally {
      await browser.close();
      page.close();
      await proxy.close();
      await sim.close();
    }
  }, 60_000);

  it("forwards an allowed origin's CORS preflight and the provider's answer; refuses any other's", async () => {
    const seen: string[] = [];
    const upstream = createServer((req, res) => {
      seen.push(`${req.method} ${req.headers.origin}`);
      res.writeHead(204, { 'access-control-allow-origin': '*', 'access-control-allow-headers': 'x-api-key' });
      res.end();
    });
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', () => r()));
    const proxy = createProxy({
      upstream: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`,
      capture: 'off',
      allowedOrigins: ['http://localhost:5173'],
      logger: {},
    });
    await proxy.listen();
    try {
      const preflight = (origin: string) =>
        fetch(`${proxy.url}/v1/messages`, {
          method: 'OPTIONS',
          headers: {
            origin,
            'access-control-request-method': 'POST',
            'access-control-request-headers': 'x-api-key',
          },
        });
      const allowed = await preflight('http://localhost:5173');
      expect(allowed.status).toBe(204);
      expect(allowed.headers.get('access-control-allow-origin')).toBe('*');
      const foreign = await preflight('https://evil.example');
      expect(foreign.status).toBe(403);
      expect(foreign.headers.get('access-control-allow-origin')).toBeNull();
      expect(seen).toEqual(['OPTIONS http://localhost:5173']);
    } finally {
      await proxy.close();
      upstream.close();
    }
  });

  it('refuses an allowed origin that is not one', () => {
    expect(() => createProxy({ allowedOrigins: ['http://localhost:5173/app'] })).toThrow(ProxyConfigError);
  });
});

describe('credentials in URLs', () => {
  it('redacts user information and secret query values, in a URL and in free text', () => {
    expect(redactUrl('http://user:PASSWORD@host:4318/v1')).toBe('http://***@host:4318/v1');
    expect(redactUrl('redis://:PASSWORD@10.0.0.5:6380/2')).toBe('redis://***@10.0.0.5:6380/2');
    expect(redactUrl('https://c.example/v1/traces?api_key=SECRET&region=eu')).toBe(
      'https://c.example/v1/traces?api_key=***&region=eu',
    );
    expect(redactUrl('connect ECONNREFUSED to http://u:PW@h:1 failed')).toBe(
      'connect ECONNREFUSED to http://***@h:1 failed',
    );
    expect(redactUrl('http://u:PW@bad host:1')).not.toContain('PW');
    expect(redactUrl('https://api.anthropic.com')).toBe('https://api.anthropic.com');
  });

  it('never shows an OTLP, upstream or state password on health, in the start-up log or in errors', async () => {
    const receiver = await startOtlpReceiver();
    const sim = createSimulator({ requireApiKey: false });
    const simUrl = await sim.listen();
    const collector = receiver.url.replace('http://', 'http://user:PASSWORD@');
    const p = await startCliProxy([
      '--upstream',
      simUrl,
      '--capture',
      'off',
      '--no-warm-up',
      '--otlp',
      `${collector}?token=TOKENSECRET`,
    ]);
    try {
      const health = await (await fetch(`${p.url}/_cacheward/health`)).text();
      expect(health).toContain('***@127.0.0.1');
      for (const secret of ['PASSWORD', 'TOKENSECRET']) {
        expect(health).not.toContain(secret);
        expect(p.stderr.join('\n')).not.toContain(secret);
      }
      expect(p.stderr.join('\n')).toMatch(/exporting OTLP to http:\/\/\*\*\*@127\.0\.0\.1/);
    } finally {
      p.child.kill('SIGTERM');
      await p.exited;
    }
    // The library takes an upstream with credentials; its health shows none.
    const lib = createProxy({
      upstream: simUrl.replace('http://', 'http://u:PASSWORD@'),
      capture: 'off',
      logger: {},
    });
    await lib.listen();
    try {
      expect(JSON.stringify(lib.health())).not.toContain('PASSWORD');
    } finally {
      await lib.close();
    }
    // Errors name what is wrong, never the password.
    for (const args of [
      ['proxy', '--upstream', 'http://u:PASSWORD@127.0.0.1:1', '--port', '0'],
      ['proxy', '--otlp', 'grpc://u:PASSWORD@127.0.0.1:4317', '--port', '0'],
      ['proxy', '--state', 'redis://u:PASSWORD@h:6379/x', '--port', '0'],
      ['run', '--upstream', 'http://u:PASSWORD@127.0.0.1:1', '--', 'true'],
    ]) {
      const r = await cli([
        ...args.slice(0, 1),
        '--dir',
        mkdtempSync(join(tmpdir(), 'cw-e-')),
        ...args.slice(1),
      ]);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr).toMatch(/\*\*\*@|names no host|is not a number/);
      expect(r.stderr + r.stdout).not.toContain('PASSWORD');
    }
    await sim.close();
    await receiver.close();
  }, 60_000);
});
