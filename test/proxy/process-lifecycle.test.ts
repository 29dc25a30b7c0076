import { mkdtempSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, describe, expect, it } from 'vitest';
import { readCaptures } from '../../src/capture/capture-reader.js';
import { createSimulator } from '../../src/sim/simulator.js';
import { messagesBody } from '../sim/helpers.js';
import { startCliProxy } from './cli-proxy.js';
import { API_KEY } from './helpers.js';

const sim = createSimulator({ maxBodyBytes: 64 * 1024 * 1024 });
const simUrl = await sim.listen();
afterAll(() => sim.close());
const captureDir = () => join(mkdtempSync(join(tmpdir(), 'cacheward-life-')), 'captures');

/** The documented bound: an exchange is on disk this long after its response ended, or sooner. */
const WINDOW_MS = 250;

async function load(
  url: string,
  ms: number,
  acked: Array<{ id: string; at: number }>,
  stopAt: () => boolean,
) {
  const client = new Anthropic({ apiKey: API_KEY, baseURL: url, maxRetries: 0 });
  const until = Date.now() + ms;
  let n = 0;
  await Promise.all(
    Array.from({ length: 8 }, async (_, worker) => {
      while (Date.now() < until && !stopAt()) {
        const body = messagesBody(4 + (n++ % 20), 400 + worker);
        try {
          const r = await client.messages.create(body as never);
          acked.push({ id: r.id, at: Date.now() });
        } catch {
          return;
        }
      }
    }),
  );
}

async function recordedIds(dir: string): Promise<Set<string>> {
  const ids = new Set<string>();
  for await (const r of readCaptures([dir], { onWarning: () => {} }))
    if (r.record.responseId) ids.add(r.record.responseId);
  return ids;
}

describe('what reaches the capture when the proxy process dies', () => {
  it(`kill -9 loses only exchanges acknowledged in the last ${WINDOW_MS} ms`, async () => {
    const dir = captureDir();
    const p = await startCliProxy(['--upstream', simUrl, '--dir', dir, '--capture', 'full']);
    const acked: Array<{ id: string; at: number }> = [];
    let killedAt = 0;
    const run = load(p.url, 10_000, acked, () => killedAt > 0);
    await new Promise((r) => setTimeout(r, 2_500));
    p.child.kill('SIGKILL');
    killedAt = Date.now();
    await run;
    await p.exited;
    const ids = await recordedIds(dir);
    const old = acked.filter((a) => a.at < killedAt - WINDOW_MS);
    expect(old.length).toBeGreaterThan(100);
    expect(old.filter((a) => !ids.has(a.id)).map((a) => killedAt - a.at)).toEqual([]);
  }, 30_000);

  it('SIGTERM writes every acknowledged exchange, and exits at once', async () => {
    const dir = captureDir();
    const p = await startCliProxy(['--upstream', simUrl, '--dir', dir, '--capture', 'full']);
    const acked: Array<{ id: string; at: number }> = [];
    let stopped = false;
    const run = load(p.url, 10_000, acked, () => stopped);
    await new Promise((r) => setTimeout(r, 1_500));
    const t0 = Date.now();
    p.child.kill('SIGTERM');
    stopped = true;
    expect(await p.exited).toBe(0);
    expect(Date.now() - t0).toBeLessThan(2_000);
    await run;
    const ids = await recordedIds(dir);
    expect(acked.length).toBeGreaterThan(20);
    expect(acked.filter((a) => !ids.has(a.id))).toEqual([]);
  }, 30_000);

  it('makes no capture files when every write fails (a full or failing disk)', async () => {
    const dir = captureDir();
    // A zero file-size limit: opening works, every write fails with EFBIG, as on a full disk.
    const p = await startCliProxy(['--upstream', simUrl, '--dir', dir, '--capture', 'full'], {
      shellPrefix: 'ulimit -f 0;',
    });
    try {
      const client = new Anthropic({ apiKey: API_KEY, baseURL: p.url, maxRetries: 0 });
      for (let i = 0; i < 12; i++)
        expect((await client.messages.create(messagesBody(3, 100) as never)).type).toBe('message');
      await new Promise((r) => setTimeout(r, 300));
      const health = (await (await fetch(`${p.url}/_cacheward/health`)).json()) as {
        capture: { state: string; failed: number };
      };
      expect(health.capture.state).toBe('degraded');
      expect(health.capture.failed).toBe(12);
      expect(readdirSync(dir)).toEqual([]);
      expect(p.stderr.filter((l) => l.includes('capture degraded'))).toHaveLength(1);
    } finally {
      p.child.kill('SIGTERM');
      await p.exited;
    }
  });
});

describe('memory after a large body', () => {
  it('gives back the memory of a 40 MB body', async () => {
    const dir = captureDir();
    const p = await startCliProxy(['--upstream', simUrl, '--dir', dir, '--capture', 'full']);
    const rss = () => {
      const m = readFileSync(`/proc/${p.child.pid}/status`, 'utf8').match(/VmRSS:\s+(\d+) kB/);
      return Number(m?.[1]) / 1024;
    };
    try {
      const client = new Anthropic({ apiKey: API_KEY, baseURL: p.url, maxRetries: 0 });
      for (let i = 0; i < 5; i++) await client.messages.create(messagesBody(6, 400) as never);
      const before = rss();
      const huge = messagesBody(2, 5 * 1024 * 1024);
      expect((await client.messages.create(huge as never)).type).toBe('message');
      const peak = rss();
      // Then nothing: an idle proxy, as in the report (RSS stayed at 635 MB two minutes later). Before the
      // fix, full mode held ~300 MB here for good; now it settles within seconds, to within 100 MB of before.
      // Its record is written in the second after the response: judge once that is over.
      await new Promise((r) => setTimeout(r, 3_000));
      let after = rss();
      for (let waited = 0; after > before + 100 && waited < 15_000; waited += 500) {
        await new Promise((r) => setTimeout(r, 500));
        after = rss();
      }
      expect(peak).toBeGreaterThan(before + 20);
      expect(after).toBeLessThan(before + 100);
    } finally {
      p.child.kill('SIGTERM');
      await p.exited;
    }
    expect(statSync(dir).isDirectory()).toBe(true);
  }, 60_000);
});
