import { readFileSync, statSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parsePrefix } from '../../src/prefix/build-prefix.js';
import { EPHEMERAL, MODES, messagesBody, send } from '../sim/helpers.js';
import { API_KEY, OPENAI_KEY, startProxy } from './helpers.js';

const h = await startProxy();
const body = messagesBody(5, 200, { 4: EPHEMERAL });
const ids = (s: string) =>
  s
    .replace(/\b(msg|req|toolu|chatcmpl-|resp|call|fc|rs)_?sim[0-9a-z]+/g, '$1_ID')
    .replace(/"created(_at)?":\d+/g, '"created":0');

async function raw(base: string, path: string, payload: string, headers: Record<string, string> = {}) {
  const res = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'x-api-key': API_KEY,
      authorization: `Bearer ${API_KEY}`,
      ...headers,
    },
    body: payload,
  });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

describe('forwarding', () => {
  it.each([
    ['/v1/messages', JSON.stringify(body)],
    ['/v1/messages', JSON.stringify({ ...body, stream: true })],
    [
      '/v1/chat/completions',
      JSON.stringify({ model: 'gpt-5.4', messages: [{ role: 'user', content: 'hi' }] }),
    ],
    [
      '/v1/chat/completions',
      JSON.stringify({
        model: 'gpt-5.4',
        stream: true,
        stream_options: { include_usage: true },
        messages: [{ role: 'user', content: 'hi' }],
      }),
    ],
    ['/v1/responses', JSON.stringify({ model: 'gpt-5.6', input: 'hi' })],
    ['/v1/responses', JSON.stringify({ model: 'gpt-5.6', input: 'hi', stream: true })],
    [
      '/v1/messages/count_tokens',
      JSON.stringify({ model: 'claude-opus-5', messages: [{ role: 'user', content: 'hi' }] }),
    ],
  ])('%s answers byte-identically to a direct call (ids aside): %s', async (path, payload) => {
    h.sim.reset();
    const direct = await raw(h.simUrl, path, payload);
    h.sim.reset();
    const proxied = await raw(h.proxy.url, path, payload);
    expect(proxied.status).toBe(direct.status);
    expect(ids(proxied.text)).toBe(ids(direct.text));
    expect(proxied.headers.get('content-type')).toBe(direct.headers.get('content-type'));
  });

  it.each(MODES)('serves the official SDKs through the proxy (%s)', async (_m, stream) => {
    h.sim.reset();
    const first = await send(h.anthropic(), body, stream);
    const second = await send(h.anthropic(), body, stream);
    expect(first.cache_creation_input_tokens).toBeGreaterThan(0);
    expect(second.cache_read_input_tokens).toBe(first.cache_creation_input_tokens);
    const o = h.openai();
    const r = stream
      ? await o.responses.stream({ model: 'gpt-5.6', input: 'hi' }).finalResponse()
      : await o.responses.create({ model: 'gpt-5.6', input: 'hi' });
    expect(r.output_text).toBe('Simulated reply 1.');
  });

  it('passes other paths through unchanged', async () => {
    const res = await fetch(`${h.proxy.url}/_sim/stats`);
    expect(res.status).toBe(200);
    expect(await res.json()).toHaveProperty('entries');
  });

  it('forwards a malformed JSON body untouched and lets the upstream decide', async () => {
    const bad = '{"model": "claude-opus-5",\n "messages": [}';
    const res = await raw(h.proxy.url, '/v1/messages', bad);
    expect(res.status).toBe(400);
    expect(res.text).toMatch(/line 2, column 15/);
    const rec = (await h.records()).find((r) => r.record.requestBytes === Buffer.byteLength(bad));
    expect(rec?.record.parseError).toMatch(/line 2, column 15/);
    expect(rec?.body?.toString()).toBe(bad);
  });

  it('forwards a 30 MB body and records it', async () => {
    const big = {
      model: 'claude-opus-5',
      max_tokens: 10,
      messages: [{ role: 'user', content: 'x'.repeat(30 * 1024 * 1024) }],
    };
    const payload = JSON.stringify(big);
    const res = await raw(h.proxy.url, '/v1/messages', payload);
    expect(res.status).toBe(200);
    const rec = (await h.records()).find((r) => r.record.requestBytes === Buffer.byteLength(payload));
    expect(rec?.record.status).toBe(200);
    expect(rec?.body?.equals(Buffer.from(payload))).toBe(true);
  });
});

describe('capture records', () => {
  it('holds what was sent and what came back', async () => {
    h.sim.reset();
    const payload = JSON.stringify(body, null, 2).replace('alpha', 'alphä');
    const res = await raw(h.proxy.url, '/v1/messages', payload, {
      'x-cacheward-session': 'capture-test',
      'anthropic-beta': 'b-one,b-two',
    });
    expect(res.status).toBe(200);
    const rec = (await h.records()).find((r) => r.record.session.key === 'capture-test');
    expect(rec).toBeDefined();
    const r = rec!.record;
    const p = parsePrefix(payload, {
      format: 'anthropic-messages',
      headers: { 'anthropic-beta': 'b-one,b-two' },
    });
    expect(r).toMatchObject({
      provider: 'anthropic',
      route: '/v1/messages',
      model: 'claude-opus-5',
      status: 200,
      outcome: 'complete',
      stream: false,
    });
    expect(r.session).toEqual({ key: 'capture-test', source: 'header' });
    expect(r.betas).toEqual(['b-one', 'b-two']);
    expect(r.headers['anthropic-beta']).toBe('b-one,b-two');
    expect(r.prefix?.blocks.map((b) => b.hash)).toEqual(p.blocks.map((b) => b.hash));
    expect(r.prefix?.blocks[4]).toMatchObject({
      level: 'messages',
      kind: 'text',
      role: 'user',
      cc: { type: 'ephemeral' },
    });
    expect(r.usage?.normalized?.cacheWrite).toBeGreaterThan(0);
    expect(r.responseId).toMatch(/^msg_/);
    expect(r.stopReason).toBe('end_turn');
    expect(r.times.start).toBeLessThanOrEqual(r.times.firstByte ?? 0);
    expect(rec!.body?.toString('utf8')).toBe(payload);
  });

  it('writes 0600 files in a 0700 folder', async () => {
    const recs = await h.records();
    expect(statSync(h.dir).mode & 0o777).toBe(0o700);
    expect(statSync(recs[0]!.file).mode & 0o777).toBe(0o600);
  });

  it('never writes the API key or the authorization header', async () => {
    await h.anthropic().messages.create(body as never);
    await h
      .openai()
      .chat.completions.create({ model: 'gpt-5.4', messages: [{ role: 'user', content: 'hi' }] });
    const recs = await h.records();
    for (const file of new Set(recs.map((r) => r.file))) {
      const text = readFileSync(file, 'utf8');
      expect(text).not.toContain(API_KEY);
      expect(text).not.toContain(OPENAI_KEY);
      expect(text.toLowerCase()).not.toContain('authorization');
      expect(text).not.toContain('x-api-key');
    }
  });
});
