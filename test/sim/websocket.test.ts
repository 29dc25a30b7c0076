// The simulator's Responses WebSocket: the same caching, scripts, faults and usage as HTTP, OpenAI's
// handshake refusals, the connection-local cache for `store: false`, `generate: false` warm-ups, the
// connection limit, and an error event for a frame it cannot read.

import { afterAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { VirtualClock } from '../../src/core/clock.js';
import { createSimulator } from '../../src/sim/simulator.js';

type Json = Record<string, any>;
const KEY = 'sk-cacheward-test-key';
const instructions = `You are a test agent. ${'Answer exactly as the script says. '.repeat(300)}`;
const script = {
  conversations: [{ match: 'SIM-WS', turns: [{ text: 'one' }, { text: 'two' }, { text: 'three' }] }],
};

async function start(extra: Json = {}) {
  const clock = new VirtualClock();
  const sim = createSimulator({ clock, script, ...extra });
  const url = await sim.listen();
  afterAll(() => sim.close());
  return { sim, url, clock };
}

/** A raw socket that collects events and sends `response.create`s one at a time. */
async function socket(url: string, headers: Record<string, string> = { authorization: `Bearer ${KEY}` }) {
  const ws = new WebSocket(`${url.replace('http', 'ws')}/v1/responses`, { headers });
  const events: Json[] = [];
  let wake: (() => void) | undefined;
  ws.on('message', (d: Buffer) => {
    events.push(JSON.parse(String(d)));
    wake?.();
  });
  const closed = new Promise<number>((r) => ws.once('close', (code) => r(code)));
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  const next = async (from: number): Promise<Json> => {
    for (;;) {
      const e = events
        .slice(from)
        .find((x) => ['response.completed', 'error', 'response.failed'].includes(String(x.type)));
      if (e) return e;
      await new Promise<void>((r) => {
        wake = r;
      });
    }
  };
  const create = (body: Json | string) => {
    const from = events.length;
    ws.send(typeof body === 'string' ? body : JSON.stringify({ type: 'response.create', ...body }));
    return next(from);
  };
  return { ws, events, create, closed };
}

describe('the simulator over WebSocket', async () => {
  const { sim, url, clock } = await start();

  it('answers like POST /v1/responses streamed: the same events and usage', async () => {
    const s = await socket(url);
    const done = await s.create({
      model: 'gpt-5.5',
      instructions,
      input: 'SIM-WS hello',
      prompt_cache_key: 'a',
    });
    expect(done.type).toBe('response.completed');
    expect(done.response.output[0].content[0].text).toBe('one');
    expect(s.events.map((e) => e.type)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.completed',
    ]);
    // The same request over HTTP reads what the socket wrote, and reports the same input size.
    clock.advance(5_000);
    const res = await fetch(`${url}/v1/responses`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt-5.5', instructions, input: 'SIM-WS hello', prompt_cache_key: 'a' }),
    });
    const http = (await res.json()) as Json;
    expect(http.usage.input_tokens).toBe(done.response.usage.input_tokens);
    expect(http.usage.input_tokens_details.cached_tokens).toBeGreaterThan(1000);
    s.ws.close();
  });

  it('chains store: false responses on the same socket only, and only on its latest', async () => {
    const s = await socket(url);
    const base = { model: 'gpt-5.5', instructions, store: false, prompt_cache_key: 'b' };
    const one = await s.create({ ...base, input: 'SIM-WS chain' });
    clock.advance(5_000);
    const two = await s.create({
      ...base,
      previous_response_id: one.response.id,
      input: [{ role: 'user', content: 'SIM-WS more' }],
    });
    expect(two.response.output[0].content[0].text).toBe('two');
    expect(two.response.usage.input_tokens_details.cached_tokens).toBeGreaterThan(1000);
    const stale = await s.create({ ...base, previous_response_id: one.response.id, input: 'x' });
    expect(stale).toMatchObject({
      type: 'error',
      status: 400,
      error: { code: 'previous_response_not_found' },
    });
    const other = await socket(url);
    const elsewhere = await other.create({ ...base, previous_response_id: two.response.id, input: 'x' });
    expect(elsewhere.error.code).toBe('previous_response_not_found');
    s.ws.close();
    other.ws.close();
  });

  it('warms up with generate: false: the input is cached, nothing is generated, no turn is used', async () => {
    const s = await socket(url);
    const body = { model: 'gpt-5.5', instructions, input: 'SIM-WS warm', prompt_cache_key: 'c' };
    const warm = await s.create({ ...body, generate: false });
    expect(warm.response.output).toEqual([]);
    expect(warm.response.usage.output_tokens).toBe(0);
    clock.advance(5_000);
    const real = await s.create({
      ...body,
      previous_response_id: warm.response.id,
      input: [{ role: 'user', content: 'SIM-WS go' }],
    });
    expect(real.response.output[0].content[0].text).toBe('one');
    expect(real.response.usage.input_tokens_details.cached_tokens).toBeGreaterThan(1000);
    s.ws.close();
  });

  it('sends an error event for a frame it cannot read, and for an unknown event type', async () => {
    const s = await socket(url);
    expect(await s.create('not json')).toMatchObject({
      type: 'error',
      status: 400,
      error: { code: 'invalid_json' },
    });
    expect(await s.create({ type: 'response.cancel' })).toMatchObject({ type: 'error', status: 400 });
    expect(await s.create({ model: 'gpt-5.5' })).toMatchObject({
      type: 'error',
      status: 400,
      error: { param: 'input' },
    });
    s.ws.close();
    expect(sim.stats().openai.requests).toBeGreaterThan(0);
  });

  it('refuses the handshake as OpenAI does: 401 without a key, 404 elsewhere', async () => {
    const status = (path: string, headers: Record<string, string>) =>
      new Promise<number>((resolve) => {
        const ws = new WebSocket(`${url.replace('http', 'ws')}${path}`, { headers });
        ws.once('unexpected-response', (_q, res) => resolve(res.statusCode ?? 0));
        ws.once('open', () => resolve(101));
      });
    expect(await status('/v1/responses', {})).toBe(401);
    expect(await status('/v1/realtime', { authorization: `Bearer ${KEY}` })).toBe(404);
  });
});

describe('faults and the connection limit', async () => {
  const { url } = await start({ websocketMaxMs: 300 });

  it('answers a 429 fault as an error event with its status, a reset as a dropped socket', async () => {
    const s = await socket(url, { authorization: `Bearer ${KEY}`, 'x-sim-fault': '429' });
    expect(await s.create({ model: 'gpt-5.5', input: 'SIM-WS x' })).toMatchObject({
      type: 'error',
      status: 429,
      error: { code: 'rate_limit_exceeded' },
    });
    s.ws.close();
    const r = await socket(url, { authorization: `Bearer ${KEY}`, 'x-sim-fault': 'reset-mid-stream' });
    r.ws.send(JSON.stringify({ type: 'response.create', model: 'gpt-5.5', input: 'SIM-WS y' }));
    expect(await r.closed).toBe(1006);
  });

  it('closes a socket at its limit with the documented error event', async () => {
    const s = await socket(url);
    expect(await s.closed).toBe(1000);
    expect(s.events.at(-1)).toMatchObject({
      type: 'error',
      error: { code: 'websocket_connection_limit_reached' },
    });
  });
});
