// The live page under any client: subscribers that never read are dropped once a small buffer fills, the
// number of streams is capped, and session labels and model names are capped wherever the proxy keeps or
// shows them (page, state, metrics), with two long labels kept apart.

import { readFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import Anthropic from '@anthropic-ai/sdk';
import { describe, expect, it } from 'vitest';
import { LABEL_MAX } from '../../src/core/cap-label.js';
import type { LiveSnapshot } from '../../src/proxy/live-analysis.js';
import { createSimulator } from '../../src/sim/simulator.js';
import { messagesBody } from '../sim/helpers.js';
import { waitFor } from '../wait-for.js';
import { startCliProxy } from './cli-proxy.js';
import { API_KEY, startProxy } from './helpers.js';

/** A client of /_cacheward/events that sends its request and never reads a byte of the answer. */
async function deafSubscriber(url: string): Promise<Socket> {
  const u = new URL(url);
  const s = connect(Number(u.port), u.hostname);
  s.on('error', () => {});
  await new Promise<void>((r) => s.once('connect', () => r()));
  s.pause();
  s.write(`GET /_cacheward/events HTTP/1.1\r\nhost: ${u.host}\r\n\r\n`);
  return s;
}

const metricsOf = async (url: string) => (await fetch(`${url}/_cacheward/metrics`)).text();
const metric = (text: string, name: string) => Number(text.match(new RegExp(`^${name} (\\d+)`, 'm'))?.[1]);

describe('live-page subscribers that never read', () => {
  it('are dropped once their buffer fills; the proxy stays small and gives the memory back', async () => {
    const sim = createSimulator({ requireApiKey: false });
    const simUrl = await sim.listen();
    const p = await startCliProxy(['--upstream', simUrl, '--capture', 'off', '--no-warm-up']);
    const rss = () =>
      Number(readFileSync(`/proc/${p.child.pid}/status`, 'utf8').match(/VmRSS:\s+(\d+) kB/)?.[1]) / 1024;
    const deaf: Socket[] = [];
    try {
      for (let i = 0; i < 30; i++) deaf.push(await deafSubscriber(p.url));
      const idle = rss();
      // 600 requests, each under its own 12 KB session label: every event row carries it to 30 streams
      // (216 MB unread before labels were capped and slow streams dropped).
      const client = new Anthropic({ apiKey: API_KEY, baseURL: p.url, maxRetries: 0 });
      let next = 0;
      await Promise.all(
        Array.from({ length: 6 }, async () => {
          while (next < 600) {
            const i = next++;
            await client.messages.create(messagesBody(2, 40) as never, {
              headers: { 'x-cacheward-session': `${i}-${'x'.repeat(12_000)}` },
            });
          }
        }),
      );
      const metrics = await metricsOf(p.url);
      const grown = rss() - idle;
      expect(grown).toBeLessThan(100);
      expect(metric(metrics, 'cacheward_live_buffered_bytes')).toBeLessThanOrEqual(30 * 1024 * 1024);
      for (const s of deaf) s.destroy();
      deaf.length = 0;
      await waitFor(
        'no subscriber left',
        async () => metric(await metricsOf(p.url), 'cacheward_live_subscribers') === 0,
      );
      expect(rss() - idle).toBeLessThan(100);
    } finally {
      for (const s of deaf) s.destroy();
      p.child.kill('SIGTERM');
      await p.exited;
      await sim.close();
    }
  }, 120_000);
});

describe('live-page streams', () => {
  it('drops a subscriber that stops reading, keeps one that reads, and caps how many are open', async () => {
    const h = await startProxy({ capture: 'hashes' });
    const stop = new AbortController();
    const reader = await fetch(`${h.proxy.url}/_cacheward/events`, { signal: stop.signal });
    const seen: string[] = [];
    const reading = (async () => {
      const dec = new TextDecoder();
      for await (const chunk of reader.body as unknown as AsyncIterable<Uint8Array>)
        seen.push(dec.decode(chunk));
    })().catch(() => {});
    const deaf = await deafSubscriber(h.proxy.url);
    // Rows far past what the kernel and the 1 MB bound hold for the deaf stream: records of a real
    // exchange, analyzed again and again (each analysis is a row sent to every stream).
    await h.anthropic().messages.create(messagesBody(2, 40) as never);
    const [rec] = await h.records();
    const record = rec?.record;
    if (!record) throw new Error('no record');
    const longModel = `claude-opus-5-${'m'.repeat(3_000)}`;
    let dropped = 0;
    for (let i = 0; i < 40_000 && !dropped; i++) {
      h.proxy.live.add({ ...record, id: `again-${i}`, model: longModel });
      if (i % 500 === 499) {
        await new Promise((r) => setImmediate(r));
        dropped = metric(await metricsOf(h.proxy.url), 'cacheward_live_subscribers_dropped_total');
      }
    }
    expect(dropped).toBe(1);
    expect(metric(await metricsOf(h.proxy.url), 'cacheward_live_subscribers')).toBe(1);
    // The reader got the rows; its model names arrived capped.
    await waitFor("the reader's rows", () => seen.join('').includes('again-1'));
    const text = seen.join('');
    expect(text).toContain('event: snapshot');
    expect(text).toContain('again-1');
    expect(text).not.toContain('m'.repeat(LABEL_MAX));
    // One stream per tab; past the cap the answer says what to do.
    const more = await Promise.all(
      Array.from({ length: 32 }, () => fetch(`${h.proxy.url}/_cacheward/events`, { signal: stop.signal })),
    );
    const refused = more.filter((r) => r.status === 503);
    expect(refused).toHaveLength(1);
    expect(await refused[0]?.text()).toMatch(/live-page streams are open already/);
    stop.abort();
    await reading;
    deaf.destroy();
  }, 60_000);
});

describe('labels and model names', () => {
  it('are capped on the state endpoint, the page rows and the metrics, with two long ones kept apart', async () => {
    const h = await startProxy({ capture: 'hashes' });
    const client = h.anthropic();
    const stem = 's'.repeat(5_000);
    const model = `claude-opus-5-${'v'.repeat(20_000)}`;
    for (const label of [`${stem}-one`, `${stem}-two`])
      await client.messages
        .create({ ...messagesBody(2, 40), model } as never, { headers: { 'x-cacheward-session': label } })
        .catch(() => undefined);
    await h.proxy.flush();
    const state = (await (await fetch(`${h.proxy.url}/_cacheward/state`)).json()) as LiveSnapshot;
    const sessions = state.sessions.map((s) => s.session).filter((s) => s.startsWith('sss'));
    expect(sessions).toHaveLength(2);
    expect(new Set(sessions).size).toBe(2);
    for (const s of sessions) {
      expect(s.length).toBeLessThanOrEqual(LABEL_MAX);
      expect(s).toMatch(/…[0-9a-f]{10}$/);
    }
    for (const r of state.requests) {
      expect(r.session.length).toBeLessThanOrEqual(LABEL_MAX);
      expect((r.model ?? '').length).toBeLessThanOrEqual(LABEL_MAX);
    }
    const metrics = h.proxy.metrics();
    for (const line of metrics.split('\n')) expect(line.length).toBeLessThan(LABEL_MAX + 200);
  });
});
