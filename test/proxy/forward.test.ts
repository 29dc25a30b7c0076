// The HTTPS forward-proxy mode: the official SDKs with HTTPS_PROXY-style proxying and the local CA trusted
// reach the simulator through a decrypted provider host and are captured exactly as in base-URL mode; any
// other CONNECT is a byte-exact tunnel that never gets a certificate; a client that distrusts the CA is told
// the fix; the CA's key stays 0600 and out of every capture, log and health answer.

import { randomBytes, X509Certificate } from 'node:crypto';
import { chmodSync, mkdtempSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { createServer as createNetServer, connect as netConnect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer as createTlsServer, connect as tlsConnect } from 'node:tls';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { ProxyAgent, fetch as undiciFetch } from 'undici';
import { afterAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { VirtualClock } from '../../src/core/clock.js';
import type { ProxyOptions } from '../../src/proxy/create-proxy.js';
import { CA_KEY_FILE, LocalCa, LocalCaError } from '../../src/proxy/local-ca.js';
import { agentConversation, appendUserTurn } from '../../src/sim/agent-conversation.js';
import { createSimulator } from '../../src/sim/simulator.js';
import { waitFor } from '../wait-for.js';
import { API_KEY, capturingProxy, OPENAI_KEY } from './helpers.js';

type Json = Record<string, any>;

const root = mkdtempSync(join(tmpdir(), 'cacheward-forward-'));
const caDir = join(root, 'state', 'ca');
const clock = new VirtualClock();
const sim = createSimulator({ clock });
const simUrl = await sim.listen();
afterAll(() => sim.close());
const dispatchers: ProxyAgent[] = [];
afterAll(() => Promise.all(dispatchers.map((d) => d.close())));

function proxyWith(name: string, extra: Partial<ProxyOptions> = {}) {
  return capturingProxy({ upstream: simUrl, dir: join(root, name), clock, ...extra });
}

/** A fetch that goes through `proxyUrl` by CONNECT, trusting `ca` (or only the system store). */
function proxiedFetch(proxyUrl: string, ca?: string): typeof fetch {
  const dispatcher = new ProxyAgent({ uri: proxyUrl, ...(ca ? { requestTls: { ca } } : {}) });
  dispatchers.push(dispatcher);
  return ((url: string, init: RequestInit) =>
    undiciFetch(url, { ...(init as object), dispatcher } as never)) as unknown as typeof fetch;
}

/** Three turns of one Anthropic conversation (its second and third read the first's cache). */
async function anthropicSession(client: Anthropic, label: string): Promise<string[]> {
  let conv = agentConversation({ turns: 2, seed: 7 });
  const ids: string[] = [];
  for (let turn = 0; turn < 3; turn++) {
    clock.advance(10_000);
    const m = await client.messages.create(conv as never, { headers: { 'x-cacheward-session': label } });
    ids.push(m.id);
    conv = appendUserTurn(conv, `turn ${turn + 2}`);
  }
  return ids;
}

/** What must be the same in two captures of the same traffic: everything but ids, times and labels. */
function comparable(r: Json): Json {
  // The bodies are compared whole elsewhere (on disk they are deltas naming an earlier record's id).
  const { id, times, session, conversation, responseId, body, ...rest } = r;
  // The prefix's delta base names the previous record by id.
  const prefix = rest.prefix && {
    ...rest.prefix,
    base: rest.prefix.base && { ...rest.prefix.base, id: 'x' },
  };
  return {
    ...rest,
    prefix,
    conversation: conversation && { relation: conversation.relation, turn: conversation.turn },
  };
}

describe('forward mode', async () => {
  const base = await proxyWith('base');
  const fwd = await proxyWith('forward', { forward: { caDir } });
  const ca = readFileSync(join(caDir, 'cacheward-ca.pem'), 'utf8');

  it('creates the CA on first use, its key 0600 in a 0700 folder, and says where it is', () => {
    expect(statSync(join(caDir, CA_KEY_FILE)).mode & 0o777).toBe(0o600);
    expect(statSync(caDir).mode & 0o777).toBe(0o700);
    expect(fwd.proxy.health().forward).toEqual({
      ca: join(caDir, 'cacheward-ca.pem'),
      openHosts: ['api.anthropic.com', 'api.openai.com'],
      tunnel: 'any',
    });
    // A second open finds the same CA.
    expect(LocalCa.open({ dir: caDir }).certPem.trim()).toBe(ca.trim());
  });

  it('decrypts api.anthropic.com and captures exactly what base-URL mode captures', async () => {
    const viaForward = new Anthropic({
      apiKey: API_KEY,
      maxRetries: 0,
      fetch: proxiedFetch(fwd.proxy.url, ca),
    });
    const viaBase = new Anthropic({ apiKey: API_KEY, maxRetries: 0, baseURL: base.proxy.url });
    await sim.reset();
    const a = await anthropicSession(viaBase, 'same-script');
    await sim.reset();
    const b = await anthropicSession(viaForward, 'same-script');
    expect(b).toHaveLength(a.length);
    const [ra, rb] = [await base.records(), await fwd.records()];
    expect(rb).toHaveLength(3);
    expect(rb.map((r) => comparable(r.record))).toEqual(ra.map((r) => comparable(r.record)));
    expect(rb.map((r) => String(r.body))).toEqual(ra.map((r) => String(r.body)));
    expect(rb[2]?.record.usage?.normalized?.cacheRead).toBeGreaterThan(1000);
  });

  it('decrypts api.openai.com too (the openai SDK, Responses)', async () => {
    const client = new OpenAI({ apiKey: OPENAI_KEY, maxRetries: 0, fetch: proxiedFetch(fwd.proxy.url, ca) });
    const r = await client.responses.create({ model: 'gpt-5.5', input: 'hello through CONNECT' });
    expect(r.status).toBe('completed');
    const records = await fwd.records();
    expect(records.at(-1)?.record).toMatchObject({ route: '/v1/responses', provider: 'openai', status: 200 });
  });

  it('relays a Responses WebSocket through an opened host (wss through CONNECT), recorded as over HTTP', async () => {
    const raw = await connectThrough(fwd.proxy.url, 'api.openai.com:443');
    const secure = tlsConnect({ socket: raw, servername: 'api.openai.com', ca });
    const ws = new WebSocket('wss://api.openai.com/v1/responses', {
      headers: { authorization: `Bearer ${OPENAI_KEY}` },
      createConnection: () => secure,
    } as never);
    const done = new Promise<Json>((resolve) =>
      ws.on('message', (d: Buffer) => {
        const e = JSON.parse(String(d));
        if (e.type === 'response.completed') resolve(e);
      }),
    );
    await new Promise((r) => ws.once('open', r));
    ws.send(
      JSON.stringify({
        type: 'response.create',
        model: 'gpt-5.5',
        input: 'over wss',
        prompt_cache_key: 'fwd-ws',
      }),
    );
    const completed = await done;
    ws.close();
    const rec = (await fwd.records()).find((r) => r.record.session.key === 'pck:fwd-ws');
    expect(rec?.record).toMatchObject({
      transport: 'websocket',
      status: 200,
      responseId: completed.response.id,
    });
  });

  it('tunnels any other CONNECT byte for byte and never hands it a certificate', async () => {
    // A TCP echo server: a megabyte of random bytes comes back the same.
    const echo = createNetServer((s) => s.pipe(s));
    await new Promise<void>((r) => echo.listen(0, '127.0.0.1', () => r()));
    const port = (echo.address() as { port: number }).port;
    const tunnel = await connectThrough(fwd.proxy.url, `127.0.0.1:${port}`);
    const sent = randomBytes(1024 * 1024);
    const back: Buffer[] = [];
    let got = 0;
    const done = new Promise<void>((r) =>
      tunnel.on('data', (d: Buffer) => {
        back.push(d);
        got += d.length;
        if (got >= sent.length) r();
      }),
    );
    tunnel.write(sent);
    await done;
    expect(Buffer.concat(back).equals(sent)).toBe(true);
    tunnel.destroy();

    // A TLS server of its own: the client sees that server's certificate, not one from cacheward's CA.
    const other = LocalCa.open({ dir: join(root, 'other-ca') }).issue('127.0.0.1');
    const tlsServer = createTlsServer({ key: other.key, cert: other.cert }, (s) =>
      s.end('hello from the real host'),
    );
    await new Promise<void>((r) => tlsServer.listen(0, '127.0.0.1', () => r()));
    const tlsPort = (tlsServer.address() as { port: number }).port;
    const raw = await connectThrough(fwd.proxy.url, `127.0.0.1:${tlsPort}`);
    const secure = tlsConnect({ socket: raw, rejectUnauthorized: false, servername: 'localhost' });
    const text = await new Promise<string>((resolve) => {
      let s = '';
      secure.on('data', (d) => {
        s += d;
      });
      secure.on('end', () => resolve(s));
    });
    expect(text).toBe('hello from the real host');
    expect(secure.getPeerX509Certificate()?.raw.equals(new X509Certificate(other.cert).raw)).toBe(true);
    const metrics = await (await fetch(`${fwd.proxy.url}/_cacheward/metrics`)).text();
    expect(metrics).toMatch(/cacheward_connect_total\{result="tunneled"\} 2/);
    await new Promise((r) => echo.close(r));
    await new Promise((r) => tlsServer.close(r));
  });

  it('tells a client that does not trust the CA how to trust it', async () => {
    const untrusting = new Anthropic({ apiKey: API_KEY, maxRetries: 0, fetch: proxiedFetch(fwd.proxy.url) });
    await expect(
      untrusting.messages.create({
        model: 'claude-opus-5',
        max_tokens: 5,
        messages: [{ role: 'user', content: 'x' }],
      }),
    ).rejects.toThrow();
    const line = await waitFor('the log line on the untrusted CA', () =>
      fwd.logs.find((l) => l.includes('does not trust')),
    );
    expect(line).toContain(`NODE_EXTRA_CA_CERTS=${join(caDir, 'cacheward-ca.pem')}`);
    expect(line).toContain('cacheward ca');
  });

  it('never writes the CA key into captures, logs or health', async () => {
    const key = readFileSync(join(caDir, CA_KEY_FILE), 'utf8').split('\n')[1] as string;
    for (const f of readdirSync(fwd.dir)) expect(readFileSync(join(fwd.dir, f), 'utf8')).not.toContain(key);
    expect(fwd.logs.join('\n')).not.toContain(key);
    expect(JSON.stringify(fwd.proxy.health())).not.toContain(key);
  });
});

describe('forward mode refusals', async () => {
  const guarded = await proxyWith('guarded', { forward: { caDir, tunnel: 'loopback' }, token: 'tok-9' });

  it('asks for the token on CONNECT, and accepts it as the proxy password', async () => {
    await expect(connectThrough(guarded.proxy.url, 'api.anthropic.com:443')).rejects.toThrow(/407/);
    const ok = await connectThrough(guarded.proxy.url, 'api.anthropic.com:443', {
      'proxy-authorization': `Basic ${Buffer.from('cacheward:tok-9').toString('base64')}`,
    });
    ok.destroy();
  });

  it('tunnels only to loopback hosts when told so (cacheward run --sim)', async () => {
    const auth = { 'x-cacheward-token': 'tok-9' };
    await expect(connectThrough(guarded.proxy.url, 'example.com:443', auth)).rejects.toThrow(/403/);
    await expect(connectThrough(guarded.proxy.url, 'not a target', auth)).rejects.toThrow(/400/);
  });

  it('refuses a CA key that other users can read', () => {
    const dir = join(root, 'loose-ca');
    LocalCa.open({ dir });
    chmodSync(join(dir, CA_KEY_FILE), 0o644);
    expect(() => LocalCa.open({ dir })).toThrow(LocalCaError);
    expect(() => LocalCa.open({ dir })).toThrow(/chmod 600/);
  });
});

/** Opens `target` through the proxy with CONNECT; resolves to the socket once the proxy said 200. */
function connectThrough(
  proxyUrl: string,
  target: string,
  headers: Record<string, string> = {},
): Promise<Socket> {
  const u = new URL(proxyUrl);
  return new Promise((resolve, reject) => {
    const s = netConnect(Number(u.port), u.hostname, () => {
      const extra = Object.entries(headers)
        .map(([k, v]) => `${k}: ${v}\r\n`)
        .join('');
      s.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n${extra}\r\n`);
    });
    let head = '';
    const onData = (d: Buffer) => {
      head += d.toString('latin1');
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return;
      s.off('data', onData);
      const status = head.slice(9, 12);
      if (status !== '200') {
        s.destroy();
        reject(new Error(`CONNECT answered ${head.split('\r\n')[0]}`));
        return;
      }
      const rest = Buffer.from(head.slice(end + 4), 'latin1');
      if (rest.length) s.unshift(rest);
      resolve(s);
    };
    s.on('data', onData);
    s.on('error', reject);
  });
}
