import { spawn } from 'node:child_process';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { VirtualClock } from '../../src/core/clock.js';
import { createSimulator } from '../../src/sim/simulator.js';
import { builtCli } from '../suite.js';
import { EPHEMERAL, messagesBody, startSim } from './helpers.js';

const h = await startSim();
const body = messagesBody(3, 200, { 2: EPHEMERAL });
type Json = Record<string, any>;
const post = (path: string, init: RequestInit) => fetch(`${h.url}${path}`, { method: 'POST', ...init });
const json = async (res: Response): Promise<Json> => (await res.json()) as Json;

describe('simulator HTTP surface', () => {
  it('binds 127.0.0.1 and sends request ids', async () => {
    expect(h.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const res = await post('/v1/messages', { headers: { 'x-api-key': 'k' }, body: JSON.stringify(body) });
    expect(res.headers.get('request-id')).toMatch(/^req_/);
    const o = await post('/v1/chat/completions', {
      headers: { authorization: 'Bearer k' },
      body: JSON.stringify({ model: 'gpt-5.4', messages: [{ role: 'user', content: 'x' }] }),
    });
    expect(o.headers.get('x-request-id')).toMatch(/^req_/);
  });

  it('answers 401 without an API key, in each provider shape, unless told not to', async () => {
    const a = await post('/v1/messages', { body: JSON.stringify(body) });
    expect(a.status).toBe(401);
    expect(await a.json()).toMatchObject({ type: 'error', error: { type: 'authentication_error' } });
    const o = await post('/v1/responses', { body: JSON.stringify({ model: 'gpt-5.6', input: 'x' }) });
    expect(o.status).toBe(401);
    expect(await o.json()).toMatchObject({ error: { code: 'invalid_api_key' } });
    const open = createSimulator({ requireApiKey: false });
    expect((await open.fetch('/v1/messages', { method: 'POST', body: JSON.stringify(body) })).status).toBe(
      200,
    );
  });

  it('answers 404 for unknown routes and 400 for malformed JSON with its position', async () => {
    const nf = await fetch(`${h.url}/v1/nothing`, { headers: { 'x-api-key': 'k' } });
    expect(nf.status).toBe(404);
    expect(await nf.json()).toMatchObject({ type: 'error', error: { type: 'not_found_error' } });
    const bad = await post('/v1/messages', {
      headers: { 'x-api-key': 'k' },
      body: '{"model": "claude-opus-5",\n "messages": [}',
    });
    expect(bad.status).toBe(400);
    expect((await json(bad)).error.message).toMatch(/line 2, column 15/);
    const badChat = await post('/v1/chat/completions', {
      headers: { authorization: 'Bearer k' },
      body: '{"model":',
    });
    expect(badChat.status).toBe(400);
    expect((await json(badChat)).error.type).toBe('invalid_request_error');
  });

  it('answers 413 for a body over the limit', async () => {
    const small = createSimulator({ requireApiKey: false, maxBodyBytes: 1000 });
    const res = await small.fetch('/v1/messages', {
      method: 'POST',
      body: JSON.stringify(messagesBody(3, 500)),
    });
    expect(res.status).toBe(413);
    expect(await res.json()).toMatchObject({ error: { type: 'request_too_large' } });
  });

  it('moves its clock, reports stats and resets over /_sim', async () => {
    h.sim.reset();
    await h.anthropic().messages.create(body as never);
    const stats = await (await fetch(`${h.url}/_sim/stats`)).json();
    expect(stats).toMatchObject({ entries: 1, requests: 1, cacheWrites: 1 });
    const before = h.clock.now();
    const moved = await json(await post('/_sim/clock', { body: JSON.stringify({ advance_ms: 3_600_000 }) }));
    expect(moved.now).toBe(before + 3_600_000);
    expect((await post('/_sim/clock', { body: '{"advance_ms": -1}' })).status).toBe(400);
    await post('/_sim/reset', { body: '{}' });
    expect((await json(await fetch(`${h.url}/_sim/stats`))).entries).toBe(0);
  });

  it('evicts expired entries so memory stays bounded', async () => {
    const clock = new VirtualClock();
    const sim = createSimulator({ clock, requireApiKey: false });
    for (let i = 0; i < 50; i++) {
      const b = messagesBody(1, 600, { 0: EPHEMERAL });
      const [first] = b.messages as Array<{ content: Array<{ text: string }> }>;
      if (first?.content[0]) first.content[0].text += ` #${i}`;
      await sim.fetch('/v1/messages', { method: 'POST', body: JSON.stringify(b) });
    }
    expect(sim.stats().entries).toBe(50);
    clock.advance(10 * 60_000);
    await sim.fetch('/v1/messages', { method: 'POST', body: JSON.stringify(messagesBody(1, 10)) });
    expect(sim.stats().entries).toBe(0);
    expect(sim.stats().anthropic.expired).toBe(50);
  });
});

describe('in-process fetch', () => {
  it('serves the official SDKs with no port, sharing a virtual clock', async () => {
    const clock = new VirtualClock();
    const sim = createSimulator({ clock });
    const a = new Anthropic({ apiKey: 'k', baseURL: 'http://sim.invalid', fetch: sim.fetch, maxRetries: 0 });
    const first = await a.messages.create(body as never);
    expect(first.usage.cache_creation_input_tokens).toBeGreaterThan(0);
    const second = await a.messages.stream(body as never).finalMessage();
    expect(second.usage.cache_read_input_tokens).toBe(first.usage.cache_creation_input_tokens);
    clock.advance(6 * 60_000);
    expect((await a.messages.create(body as never)).usage.cache_read_input_tokens).toBe(0);
    const o = new OpenAI({ apiKey: 'k', baseURL: 'http://sim.invalid/v1', fetch: sim.fetch, maxRetries: 0 });
    const r = await o.responses.create({ model: 'gpt-5.6', input: 'hi' });
    expect(r.output_text).toBe('Simulated reply 1.');
  });

  it('survives a client that aborts mid-stream', async () => {
    const controller = new AbortController();
    const stream = h
      .anthropic()
      .messages.stream(body as never, { signal: controller.signal, headers: { 'x-sim-fault': 'slow=30' } });
    stream.on('streamEvent', (e) => {
      if (e.type === 'content_block_delta') controller.abort();
    });
    await expect(stream.finalMessage()).rejects.toThrow();
    const after = await h.anthropic().messages.create(body as never);
    expect(after.type).toBe('message');
  });
});

/** Starts the built CLI's `sim` with `args`; resolves to the child and the base URL its first line names. */
async function startCliSim(args: string[]) {
  const bin = builtCli();
  const child = spawn(process.execPath, [bin, 'sim', '--port', '0', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const firstLine = await new Promise<string>((resolve, reject) => {
    let buf = '';
    child.stdout.on('data', (d) => {
      buf += d;
      if (buf.includes('\n')) resolve(buf.split('\n')[0] as string);
    });
    child.once('exit', (code) => reject(new Error(`exited ${code}`)));
  });
  return { child, url: firstLine.match(/http:\/\/127\.0\.0\.1:\d+/)?.[0] };
}

describe('cacheward sim (CLI)', () => {
  it('takes --zdr: OpenAI retention then defaults to in_memory (5 minutes), not 24h', async () => {
    const cached: number[] = [];
    for (const args of [[], ['--zdr']]) {
      const { child, url } = await startCliSim(args);
      const client = new OpenAI({ apiKey: 'k', baseURL: `${url}/v1`, maxRetries: 0 });
      const body = { model: 'gpt-5.4', messages: [{ role: 'user', content: 'x '.repeat(3000) }] };
      await client.chat.completions.create(body as never);
      await fetch(`${url}/_sim/clock`, { method: 'POST', body: JSON.stringify({ advance_ms: 6 * 60_000 }) });
      const u = (await client.chat.completions.create(body as never)).usage;
      cached.push(u?.prompt_tokens_details?.cached_tokens ?? -1);
      const exit = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exit;
    }
    expect(cached[0]).toBeGreaterThan(0);
    expect(cached[1]).toBe(0);
  });

  it('prints its base URL first, serves, and stops on SIGTERM', async () => {
    const { child, url } = await startCliSim([]);
    expect(url).toBeDefined();
    const client = new Anthropic({ apiKey: 'k', baseURL: url, maxRetries: 0 });
    expect((await client.messages.create(body as never)).type).toBe('message');
    const exit = new Promise<number | null>((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    expect(await exit).toBe(0);
  });
});
