// The simulator's node:http path (web-node-bridge.ts reads node's request directly): paths as `new URL`
// spells them, repeated headers, 413 from Content-Length on a connection that stays usable, clients that
// leave during a stall or mid-body.

import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { Pool } from 'undici';
import { describe, expect, it } from 'vitest';
import { createSimulator } from '../../src/sim/simulator.js';
import { waitFor } from '../wait-for.js';
import { EPHEMERAL, messagesBody, startSim } from './helpers.js';

type Json = Record<string, any>;
const errors: string[] = [];
const h = await startSim({ logger: { error: (line) => errors.push(line) } });
const body = JSON.stringify(messagesBody(3, 1200, { 2: EPHEMERAL }));

async function post(path: string, payload: string, headers: Record<string, string> = {}) {
  const res = await fetch(`${h.url}${path}`, {
    method: 'POST',
    headers: { 'x-api-key': 'k', 'content-type': 'application/json', ...headers },
    body: payload,
  });
  return { status: res.status, headers: res.headers, json: (await res.json()) as Json };
}

describe('simulator over node:http', () => {
  it('routes the paths new URL would: a trailing slash, a query, dot segments; others 404 in shape', async () => {
    for (const path of ['/v1/messages/', '/v1/messages?beta=true', '/v1/./messages', '/v1/x/../messages']) {
      const res = await post(path, body);
      expect(res.status, path).toBe(200);
      expect(res.json.type).toBe('message');
      expect(res.headers.get('content-type')).toBe('application/json');
      expect(res.headers.get('request-id')).toMatch(/^req_/);
    }
    const nf = await post('/v1/messagesx', body);
    expect(nf.status).toBe(404);
    expect(nf.json).toMatchObject({ type: 'error', error: { type: 'not_found_error' } });
    expect(nf.json.error.message).toBe('Not Found: POST /v1/messagesx');
  });

  it('reads a repeated x-api-key as one value joined by ", ", as Web Headers would', async () => {
    // Two requests with the same two keys share a scope (the second reads); the first key alone does not.
    const sim = createSimulator({ requireApiKey: true });
    const url = await sim.listen();
    try {
      const send = (keys: string[]) =>
        new Promise<Json>((resolve, reject) => {
          const req = httpRequest(`${url}/v1/messages`, { method: 'POST' }, (res) => {
            let text = '';
            res.on('data', (d) => {
              text += d;
            });
            res.on('end', () => resolve(JSON.parse(text) as Json));
          });
          req.on('error', reject);
          for (const k of keys) req.appendHeader('x-api-key', k);
          req.setHeader('content-type', 'application/json');
          req.end(body);
        });
      const first = await send(['a', 'b']);
      expect(first.usage.cache_creation_input_tokens).toBeGreaterThan(0);
      expect((await send(['a', 'b'])).usage.cache_read_input_tokens).toBe(
        first.usage.cache_creation_input_tokens,
      );
      expect((await send(['a'])).usage.cache_read_input_tokens).toBe(0);
    } finally {
      await sim.close();
    }
  });

  it('answers 413 from Content-Length without reading the body, and the connection stays usable', async () => {
    const sim = createSimulator({ requireApiKey: false, maxBodyBytes: 1000 });
    const url = await sim.listen();
    const pool = new Pool(url, { connections: 1 });
    try {
      const big = await pool.request({
        path: '/v1/messages',
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: 'x'.repeat(200_000),
      });
      expect(big.statusCode).toBe(413);
      expect(await big.body.json()).toMatchObject({ type: 'error', error: { type: 'request_too_large' } });
      const small = await pool.request({
        path: '/v1/messages',
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(messagesBody(1, 10)),
      });
      expect(small.statusCode).toBe(200);
      expect(((await small.body.json()) as Json).type).toBe('message');
    } finally {
      await pool.close();
      await sim.close();
    }
  });

  it('writes nothing readable for a client that left during a stall', async () => {
    h.sim.reset();
    const stalled = JSON.stringify(messagesBody(3, 1300, { 2: EPHEMERAL }));
    const controller = new AbortController();
    const gone = fetch(`${h.url}/v1/messages`, {
      method: 'POST',
      headers: { 'x-api-key': 'k', 'x-sim-fault': 'stall=300' },
      body: stalled,
      signal: controller.signal,
    });
    // The client leaves once its request is in the simulator, stalled; then the stall ends with nobody there.
    await waitFor('the request to reach the simulator', () => h.sim.stats().requests === 1);
    controller.abort();
    await expect(gone).rejects.toThrow();
    await waitFor('the simulator to find its client gone', () => h.sim.stats().abandoned === 1);
    const next = await post('/v1/messages', stalled);
    expect(next.status).toBe(200);
    expect(next.json.usage.cache_read_input_tokens).toBe(0);
    expect(next.json.usage.cache_creation_input_tokens).toBeGreaterThan(0);
  });

  it('survives a client that closes mid-body and serves the next request', async () => {
    errors.length = 0;
    const { port } = new URL(h.url);
    await new Promise<void>((resolve, reject) => {
      const socket = connect(Number(port), '127.0.0.1', () => {
        socket.write(
          'POST /v1/messages HTTP/1.1\r\nhost: x\r\nx-api-key: k\r\ncontent-type: application/json\r\ncontent-length: 5000\r\n\r\n{"model":',
          () => socket.destroy(),
        );
      });
      socket.on('close', () => resolve());
      socket.on('error', reject);
    });
    const next = await post('/v1/messages', body);
    expect(next.status).toBe(200);
    expect(next.json.type).toBe('message');
    // Nothing else went wrong inside the simulator on the way: the client's own abort is all it reported.
    expect(errors.filter((e) => e !== 'Error: aborted')).toEqual([]);
  });
});
