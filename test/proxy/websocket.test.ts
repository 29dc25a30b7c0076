// The Responses API over WebSocket through the proxy: the official `openai` SDK's WebSocket client into the
// simulator (many responses on one socket, chains, an error mid-response, the connection limit), and a
// scripted upstream for what must reach each side unaltered (frames, closes, resets, a frame that is not JSON).

import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import OpenAI from 'openai';
import { ResponsesWS } from 'openai/resources/responses/ws';
import { afterAll, describe, expect, it } from 'vitest';
import { type WebSocket, WebSocketServer, WebSocket as WsClient } from 'ws';
import { type OtlpReceiver, startOtlpReceiver } from '../telemetry/otlp-receiver.js';
import { waitFor } from '../wait-for.js';
import { capturingProxy, OPENAI_KEY, startProxy } from './helpers.js';

type Json = Record<string, any>;

const script = {
  conversations: [
    { match: 'WS-CHAIN', turns: [{ text: 'first answer' }, { text: 'second answer' }, { text: 'third' }] },
    { match: 'WS-MANY', turns: [{ text: 'one' }, { text: 'two' }, { text: 'three' }, { text: 'four' }] },
  ],
};
const instructions = `You are a test agent. ${'Keep every answer short and exact. '.repeat(300)}`;

/** Opens the SDK's Responses WebSocket against `baseURL` and collects every server event. */
async function connect(baseURL: string, headers: Record<string, string> = {}) {
  const client = new OpenAI({ apiKey: OPENAI_KEY, baseURL, maxRetries: 0 });
  const ws = new ResponsesWS(client, { headers });
  const events: Json[] = [];
  const errors: Error[] = [];
  const waiters: Array<() => void> = [];
  ws.on('event', (e) => {
    events.push(e as Json);
    for (const w of waiters.splice(0)) w();
  });
  ws.on('error', (e) => {
    errors.push(e);
    for (const w of waiters.splice(0)) w();
  });
  const closed = new Promise<{ code: number; reason: string }>((resolve) => {
    ws.socket.on('close', (code: number, reason: string) => resolve({ code, reason: String(reason) }));
  });
  await new Promise<void>((resolve, reject) => {
    ws.socket.on('open', () => resolve());
    ws.socket.on('error', reject);
  });
  /** Waits until an event (or error) of one of `types` arrived after `from`. */
  const until = async (from: number, types: string[]) => {
    for (;;) {
      const hit = events.slice(from).find((e) => types.includes(String(e.type)));
      if (hit) return hit;
      await new Promise<void>((r) => waiters.push(r));
    }
  };
  const create = async (body: Json) => {
    const from = events.length;
    ws.send({ type: 'response.create', ...body } as never);
    return until(from, ['response.completed', 'response.failed', 'response.incomplete', 'error']);
  };
  return { ws, events, errors, create, until, closed };
}

describe('Responses over WebSocket through the proxy into the simulator', async () => {
  const h = await startProxy({}, { script });

  it('carries many responses on one socket, chained with previous_response_id (store: false), each one exchange', async () => {
    const c = await connect(`${h.proxy.url}/v1`);
    const first = await c.create({
      model: 'gpt-5.5',
      instructions,
      input: 'WS-CHAIN start',
      store: false,
      prompt_cache_key: 'ws-chain',
    });
    expect(first.type).toBe('response.completed');
    expect(first.response.output[0].content[0].text).toBe('first answer');
    h.clock.advance(5_000);
    const second = await c.create({
      model: 'gpt-5.5',
      instructions,
      previous_response_id: first.response.id,
      input: [{ role: 'user', content: 'WS-CHAIN more' }],
      store: false,
      prompt_cache_key: 'ws-chain',
    });
    expect(second.type).toBe('response.completed');
    expect(second.response.output[0].content[0].text).toBe('second answer');
    // The connection-local cache: the second read what the first wrote.
    expect(second.response.usage.input_tokens_details.cached_tokens).toBeGreaterThan(1000);
    h.clock.advance(5_000);
    const third = await c.create({
      model: 'gpt-5.5',
      instructions,
      previous_response_id: second.response.id,
      input: [{ role: 'user', content: 'WS-CHAIN last' }],
      store: false,
      prompt_cache_key: 'ws-chain',
    });
    expect(third.response.output[0].content[0].text).toBe('third');
    c.ws.close();
    await c.closed;

    const records = (await h.records()).filter((r) => r.record.session.key === 'pck:ws-chain');
    expect(records).toHaveLength(3);
    for (const r of records) {
      expect(r.record).toMatchObject({
        transport: 'websocket',
        method: 'POST',
        route: '/v1/responses',
        status: 200,
        outcome: 'complete',
        stream: true,
        model: 'gpt-5.5',
      });
      // The body recorded is the frame the client sent, byte for byte.
      expect(JSON.parse(String(r.body)).type).toBe('response.create');
    }
    const [a, b, c3] = records.map((r) => r.record);
    expect(a?.responseId).toBe(first.response.id);
    expect(b?.chain).toEqual({ previous: first.response.id, context: 'known' });
    expect(c3?.chain).toEqual({ previous: second.response.id, context: 'known' });
    expect(b?.conversation).toMatchObject({ relation: 'continues', id: a?.conversation?.id, turn: 2 });
    expect(c3?.conversation).toMatchObject({ relation: 'continues', turn: 3 });
    expect(b?.usage?.normalized?.cacheRead).toBe(second.response.usage.input_tokens_details.cached_tokens);
    // Shown live, counted in the metrics.
    const live = h.proxy.live.snapshot().requests.filter((r) => r.session === 'pck:ws-chain');
    expect(live).toHaveLength(3);
    const metrics = h.proxy.metrics();
    expect(metrics).toMatch(
      /cacheward_requests_total\{provider="openai",model="gpt-5\.5",status="200"\} [3-9]/,
    );
  });

  it('records an error event mid-response, and the socket goes on to the next response', async () => {
    const c = await connect(`${h.proxy.url}/v1`, { 'x-sim-fault': 'error-mid-stream' });
    const one = await c.create({ model: 'gpt-5.5', input: 'WS-MANY a', prompt_cache_key: 'ws-err' });
    expect(one.type).toBe('error');
    const two = await c.create({ model: 'gpt-5.5', input: 'WS-MANY b', prompt_cache_key: 'ws-err' });
    expect(two.type).toBe('error');
    c.ws.close();
    await c.closed;
    const records = (await h.records()).filter((r) => r.record.session.key === 'pck:ws-err');
    expect(records).toHaveLength(2);
    for (const r of records) {
      expect(r.record.status).toBe(200);
      expect(r.record.error).toMatch(/The server had an error/);
      expect(r.record.outcome).toBe('upstream_error');
    }
  });
});

describe('the connection limit', async () => {
  const h = await startProxy({}, { script, websocketMaxMs: 400 });

  it('reaches the client as the upstream sends it; a new socket continues the chain', async () => {
    const c = await connect(`${h.proxy.url}/v1`);
    const first = await c.create({
      model: 'gpt-5.5',
      instructions,
      input: 'WS-CHAIN go',
      prompt_cache_key: 'ws-limit',
    });
    expect(first.type).toBe('response.completed');
    const limit = await c.until(0, ['error']);
    expect(limit.error.code).toBe('websocket_connection_limit_reached');
    expect((await c.closed).code).toBe(1000);
    const d = await connect(`${h.proxy.url}/v1`);
    const second = await d.create({
      model: 'gpt-5.5',
      instructions,
      previous_response_id: first.response.id,
      input: [{ role: 'user', content: 'WS-CHAIN again' }],
      prompt_cache_key: 'ws-limit',
    });
    expect(second.response.output[0].content[0].text).toBe('second answer');
    d.ws.close();
    const records = (await h.records()).filter((r) => r.record.session.key === 'pck:ws-limit');
    expect(records.map((r) => r.record.chain?.context)).toEqual([undefined, 'known']);
  });
});

/** A scripted upstream: answers each `response.create` with `frames`, and lets a test act on its sockets. */
async function scriptedUpstream(onSocket: (ws: WebSocket, req: IncomingMessage) => void) {
  const server = createServer((_req, res) => {
    res.writeHead(404);
    res.end();
  });
  const wss = new WebSocketServer({ server });
  wss.on('connection', onSocket);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  afterAll(async () => {
    for (const c of wss.clients) c.terminate();
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function proxyTo(upstream: string, extra: Json = {}) {
  return capturingProxy({ upstream, ...extra });
}

function open(url: string, headers: Record<string, string> = {}): Promise<WsClient> {
  const ws = new WsClient(url.replace(/^http/, 'ws'), { headers: { authorization: 'Bearer k', ...headers } });
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve(ws));
    ws.once('error', reject);
  });
}

function closeOf(ws: WsClient): Promise<{ code: number; reason: string }> {
  return new Promise((resolve) =>
    ws.once('close', (code, reason) => resolve({ code, reason: String(reason) })),
  );
}

describe('frames, closes and bad input against a scripted upstream', async () => {
  const received: Array<{ data: Buffer; binary: boolean }> = [];
  const upstreamSockets: WebSocket[] = [];
  const upstreamCloses: Array<{ code: number; reason: string }> = [];
  let handshake: IncomingMessage | undefined;
  const upstream = await scriptedUpstream((ws, req) => {
    handshake = req;
    upstreamSockets.push(ws);
    ws.on('message', (data: Buffer, binary: boolean) => received.push({ data, binary }));
    ws.on('close', (code, reason) => upstreamCloses.push({ code, reason: String(reason) }));
  });
  const { proxy, records } = await proxyTo(upstream);

  it('relays every frame unaltered both ways, spacing, key order and binary frames included', async () => {
    const ws = await open(`${proxy.url}/v1/responses?x=1`, { 'x-custom': 'kept' });
    const sent = [
      Buffer.from(
        '{"type":"response.create",  "model":"gpt-5.5","input":"hi ü","prompt_cache_key":"frames" }',
      ),
      Buffer.from('{"type":"response.processed","response_id":"r"}'),
    ];
    ws.send(sent[0] as Buffer, { binary: false });
    ws.send(sent[1] as Buffer, { binary: false });
    ws.send(Buffer.from([0, 1, 2, 255]), { binary: true });
    await waitFor('three frames at the upstream', () => received.length >= 3);
    expect(received.map((r) => r.data)).toEqual([...sent, Buffer.from([0, 1, 2, 255])]);
    expect(received.map((r) => r.binary)).toEqual([false, false, true]);
    expect(handshake?.url).toBe('/v1/responses?x=1');
    expect(handshake?.headers['x-custom']).toBe('kept');
    expect(handshake?.headers.authorization).toBe('Bearer k');
    const down = [
      '{"type":"response.created","response":{"id":"r_1","model":"gpt-5.5","status":"in_progress"}}',
      '{ "type" : "response.output_text.delta", "delta": "x\\u00e9" }',
      `{"type":"response.completed","response":{"id":"r_1","model":"gpt-5.5","status":"completed","output":[],"usage":{"input_tokens":7,"output_tokens":1,"input_tokens_details":{"cached_tokens":0}}}}`,
    ];
    const got: Buffer[] = [];
    ws.on('message', (d: Buffer) => got.push(d));
    for (const f of down) upstreamSockets[0]?.send(f);
    await waitFor("the upstream's frames at the client", () => got.length >= down.length);
    expect(got.map(String)).toEqual(down);
    ws.close(4001, 'done here');
    expect(await waitFor("the client's close at the upstream", () => upstreamCloses.at(-1))).toEqual({
      code: 4001,
      reason: 'done here',
    });
    const rs = (await records()).filter((r) => r.record.session.key === 'pck:frames');
    expect(rs).toHaveLength(1);
    expect(rs[0]?.record).toMatchObject({
      responseId: 'r_1',
      status: 200,
      outcome: 'complete',
      transport: 'websocket',
    });
    expect(rs[0]?.record.usage?.normalized?.inputTotal).toBe(7);
    expect(Buffer.from(String(rs[0]?.body))).toEqual(sent[0]);
  });

  it('relays an upgrade on another path without recording it', async () => {
    const before = (await records()).length;
    const ws = await open(`${proxy.url}/v1/realtime?model=x`);
    ws.send('{"type":"response.create","model":"gpt-5.5","input":"not an exchange here"}', { binary: false });
    await waitFor('the frame at the upstream', () =>
      String(received.at(-1)?.data).includes('not an exchange here'),
    );
    expect(handshake?.url).toBe('/v1/realtime?model=x');
    expect(String(received.at(-1)?.data)).toContain('not an exchange here');
    ws.close();
    expect(await records()).toHaveLength(before);
  });

  it('forwards a frame that is not JSON as it came and records it as unparsable', async () => {
    const before = received.length;
    const ws = await open(`${proxy.url}/v1/responses`);
    const junk = Buffer.from('this is {not json');
    ws.send(junk, { binary: false });
    await waitFor('the frame at the upstream', () => received.length > before);
    expect(received[before]?.data).toEqual(junk);
    ws.close();
    // The binary frame of the test before is one too.
    const rs = (await records()).filter(
      (r) => r.record.outcome === 'unparsable' && String(r.body).startsWith('this'),
    );
    expect(rs).toHaveLength(1);
    expect(rs[0]?.record.parseError).toMatch(/not JSON/);
    expect(String(rs[0]?.body)).toBe('this is {not json');
  });

  it('passes an upstream close code to the client, and a client reset to the upstream as a reset', async () => {
    const ws = await open(`${proxy.url}/v1/responses`);
    const n = upstreamSockets.length;
    ws.send('{"type":"response.create","model":"gpt-5.5","input":"x","prompt_cache_key":"closes"}');
    await waitFor('the frame at the upstream', () =>
      received.some((r) => String(r.data).includes('"closes"')),
    );
    const closed = closeOf(ws);
    upstreamSockets[n - 1]?.close(1011, 'upstream broke');
    expect(await closed).toEqual({ code: 1011, reason: 'upstream broke' });
    const rs = (await records()).filter((r) => r.record.session.key === 'pck:closes');
    expect(rs[0]?.record.outcome).toBe('upstream_reset');
    expect(rs[0]?.record.error).toMatch(
      /closed the WebSocket \(code 1011, upstream broke\) before the response ended/,
    );

    const ws2 = await open(`${proxy.url}/v1/responses`);
    ws2.send('{"type":"response.create","model":"gpt-5.5","input":"y","prompt_cache_key":"reset"}');
    await waitFor('the frame at the upstream', () =>
      received.some((r) => String(r.data).includes('"reset"')),
    );
    const upstreamClosed = new Promise((r) => upstreamSockets.at(-1)?.once('close', (code) => r(code)));
    ws2.terminate();
    expect(await upstreamClosed).toBe(1006);
    const reset = (await records()).filter((r) => r.record.session.key === 'pck:reset');
    expect(reset[0]?.record.outcome).toBe('client_aborted');
  });

  it('resets the client when the upstream drops mid-response', async () => {
    const ws = await open(`${proxy.url}/v1/responses`);
    ws.send('{"type":"response.create","model":"gpt-5.5","input":"z","prompt_cache_key":"drop"}');
    await waitFor('the frame at the upstream', () => received.some((r) => String(r.data).includes('"drop"')));
    const closed = closeOf(ws);
    upstreamSockets.at(-1)?.terminate();
    expect((await closed).code).toBe(1006);
    const rs = (await records()).filter((r) => r.record.session.key === 'pck:drop');
    expect(rs[0]?.record.outcome).toBe('upstream_reset');
  });
});

describe('handshakes', async () => {
  const upstream = await scriptedUpstream(() => {});
  const { proxy } = await proxyTo(upstream, { token: 'tok-123' });

  it('passes the same admission as HTTP: a wrong token or Host never reaches the upstream', async () => {
    await expect(open(`${proxy.url}/v1/responses`)).rejects.toThrow(/401/);
    await expect(
      open(`${proxy.url}/v1/responses`, { 'x-cacheward-token': 'tok-123', host: 'evil.example' }),
    ).rejects.toThrow(/403/);
    const ws = await open(`${proxy.url}/v1/responses`, { 'x-cacheward-token': 'tok-123' });
    ws.close();
  });

  const unreachable = await proxyTo(upstream.replace(/:\d+$/, ':1'));
  const sim = await startProxy({}, {});

  it("answers 502 for an upstream it cannot reach, and the upstream's own status when it refuses", async () => {
    await expect(open(`${unreachable.proxy.url}/v1/responses`)).rejects.toThrow(/502/);
    const ws = new WsClient(`${sim.proxy.url.replace('http', 'ws')}/v1/responses`);
    const status = await new Promise((r) => ws.once('unexpected-response', (_q, res) => r(res.statusCode)));
    expect(status).toBe(401);
  });
});

describe('OTLP', async () => {
  const receiver: OtlpReceiver = await startOtlpReceiver();
  afterAll(() => receiver.close());
  const h = await startProxy(
    { otlp: { endpoint: receiver.url, spanDelayMs: 10, metricIntervalMs: 60_000 } },
    { script },
  );

  it('exports a span per response.create', async () => {
    const c = await connect(`${h.proxy.url}/v1`);
    const done = await c.create({ model: 'gpt-5.5', input: 'WS-MANY otlp', prompt_cache_key: 'ws-otlp' });
    c.ws.close();
    await h.proxy.flush();
    const spans = receiver.spans.filter((s) => s.attributes['gen_ai.response.id'] === done.response.id);
    expect(spans).toHaveLength(1);
    expect(spans[0]?.attributes).toMatchObject({
      'gen_ai.provider.name': 'openai',
      'gen_ai.request.model': 'gpt-5.5',
    });
  });
});
