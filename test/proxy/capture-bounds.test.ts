import {
  chmodSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, describe, expect, it } from 'vitest';
import { readCaptures } from '../../src/capture/capture-reader.js';
import { CaptureWriter } from '../../src/capture/capture-writer.js';
import { VirtualClock } from '../../src/core/clock.js';
import { createProxy } from '../../src/proxy/create-proxy.js';
import type { CaptureRecord } from '../../src/record/capture-record.js';
import { createSimulator } from '../../src/sim/simulator.js';
import { bareRecord } from '../fixtures/capture-records.js';
import { messagesBody } from '../sim/helpers.js';
import { API_KEY } from './helpers.js';

const sim = createSimulator({ requireApiKey: false });
const simUrl = await sim.listen();
afterAll(() => sim.close());
const tmp = () => mkdtempSync(join(tmpdir(), 'cacheward-bounds-'));
const captureBytes = (dir: string) =>
  readdirSync(dir)
    .filter((n) => n.startsWith('capture-'))
    .reduce((a, n) => a + statSync(join(dir, n)).size, 0);

describe('--max-mb', () => {
  it('holds the folder under the bound as records are written, not only at rotation', async () => {
    const dir = join(tmp(), 'captures');
    const p = createProxy({ upstream: simUrl, dir, capture: 'full', maxMb: 0.25, logger: {} });
    await p.listen();
    try {
      const client = new Anthropic({ apiKey: API_KEY, baseURL: p.url, maxRetries: 0 });
      let peak = 0;
      for (let i = 0; i < 240; i++) {
        await client.messages.create(messagesBody(3, 300 + i) as never, {
          headers: { 'x-cacheward-session': `s${i}` },
        });
        if (i % 20 === 19) {
          await p.flush();
          peak = Math.max(peak, captureBytes(dir));
        }
      }
      expect(peak).toBeGreaterThan(0.15 * 1024 * 1024);
      expect(peak).toBeLessThanOrEqual(0.25 * 1024 * 1024);
      const sessions: string[] = [];
      for await (const r of readCaptures([dir])) sessions.push(r.record.session.key);
      expect(sessions.at(-1)).toBe('s239');
      expect(sessions).not.toContain('s0');
    } finally {
      await p.close();
    }
  });
});

describe('--fix with a folder that cannot be written', () => {
  it('starts with fix state in memory, says so once, and on the health endpoint', async () => {
    const base = tmp();
    writeFileSync(join(base, 'a-file'), 'not a folder');
    const logs: string[] = [];
    const p = createProxy({
      upstream: simUrl,
      dir: join(base, 'a-file', 'captures'),
      fixes: ['tools-sort'],
      logger: { warn: (l) => logs.push(l) },
    });
    await p.listen();
    try {
      const client = new Anthropic({ apiKey: API_KEY, baseURL: p.url, maxRetries: 0 });
      for (let i = 0; i < 3; i++)
        expect((await client.messages.create(messagesBody(3, 100) as never)).type).toBe('message');
      const health = p.health();
      expect(health.status).toBe('degraded');
      expect(health.fixState).toMatchObject({ persisted: false, error: expect.stringMatching(/ENOTDIR/) });
      expect(logs.filter((l) => l.includes('fix state'))).toEqual([
        expect.stringMatching(
          /^fix state is kept in memory only \(it will not survive a restart\): ENOTDIR: not a directory/,
        ),
      ]);
    } finally {
      await p.close();
    }
  });
});

describe('capture folder permissions', () => {
  it('makes the folders it creates 0700, and leaves an existing folder alone with a warning', async () => {
    const base = tmp();
    chmodSync(base, 0o755);
    const created = join(base, 'a', 'b');
    const logs: string[] = [];
    for (const dir of [created, base]) {
      const p = createProxy({
        upstream: simUrl,
        dir,
        capture: 'hashes',
        logger: { warn: (l) => logs.push(l) },
      });
      await p.listen();
      const client = new Anthropic({ apiKey: API_KEY, baseURL: p.url, maxRetries: 0 });
      for (let i = 0; i < 2; i++) await client.messages.create(messagesBody(3, 100) as never);
      await p.close();
    }
    expect(statSync(join(base, 'a')).mode & 0o777).toBe(0o700);
    expect(statSync(created).mode & 0o777).toBe(0o700);
    expect(statSync(base).mode & 0o777).toBe(0o755);
    expect(logs.filter((l) => l.includes('readable by other users'))).toEqual([
      `capture folder ${base} is readable by other users (mode 755): capture files are 0600, but run chmod 700 ${base} to hide their names and sizes`,
    ]);
    for (const dir of [created, base])
      for (const n of readdirSync(dir).filter((f) => f.startsWith('capture-')))
        expect(statSync(join(dir, n)).mode & 0o777).toBe(0o600);
  });
});

describe('CaptureWriter memory', () => {
  const record = (id: string, session: string): CaptureRecord => bareRecord(id, session);

  it('bounds the queue in bytes: past maxQueueBytes bodies are let go, then records, counted, never held', async () => {
    const dir = tmp();
    const writer = new CaptureWriter({
      dir,
      mode: 'full',
      clock: new VirtualClock(),
      maxQueueBytes: 1024 * 1024,
      maxQueueMs: Number.POSITIVE_INFINITY,
    });
    await writer.flush();
    // 40 records of 64 KB queued in one turn (a disk that has not answered yet): 2.6 MB asked for. Past
    // the bound each record is queued without its body (512 bytes)...
    for (let i = 0; i < 40; i++)
      writer.write(record(`q${i}`, `s${i}`), { forwarded: Buffer.alloc(64 * 1024, 97 + (i % 26)) });
    const { bodiesDropped, dropped } = writer.state();
    expect(bodiesDropped).toBeGreaterThan(20);
    expect(bodiesDropped).toBeLessThan(30);
    expect(dropped).toBe(0);
    // ...until even those pass it: then records are dropped.
    for (let i = 0; i < 2_100; i++) writer.write(record(`r${i}`, `s${i}`));
    const more = writer.state().dropped;
    expect(more).toBeGreaterThan(0);
    await writer.flush();
    expect(writer.state().written).toBe(2_140 - more);
    // Once written, the queue takes records (and bodies) again.
    writer.write(record('after', 's0'), { forwarded: Buffer.alloc(64 * 1024, 98) });
    await writer.flush();
    expect(writer.state().written).toBe(2_141 - more);
    const read = [];
    for await (const r of readCaptures([dir])) read.push(r);
    expect(read.filter((r) => r.body)).toHaveLength(40 - bodiesDropped + 1);
    expect(read.filter((r) => r.record.bodyDropped)).toHaveLength(bodiesDropped);
    await writer.close();
  });

  it('writes a burst of queued records within a few event-loop turns, not one turn per record', async () => {
    const dir = tmp();
    const writer = new CaptureWriter({ dir, mode: 'full', clock: new VirtualClock() });
    await writer.flush();
    for (let i = 0; i < 500; i++)
      writer.write(record(`b${i}`, `s${i % 7}`), {
        forwarded: Buffer.from(`{"n":${i},"pad":"${'p'.repeat(2000)}"}`),
      });
    // A busy proxy: every turn of the event loop also does a millisecond of other work.
    let turns = 0;
    while (writer.state().written < 500 && turns < 2_000) {
      await new Promise((r) => setImmediate(r));
      const until = performance.now() + 1;
      while (performance.now() < until) {}
      turns++;
    }
    expect(writer.state().written).toBe(500);
    expect(turns).toBeLessThan(20);
    await writer.close();
  });

  it('keeps delta bases for a bounded number of sessions, and never for a huge body', async () => {
    const dir = tmp();
    // A burst far past the time bound: this test is about delta bases, so nothing is let go.
    const writer = new CaptureWriter({
      dir,
      mode: 'full',
      clock: new VirtualClock(),
      maxQueueMs: Number.POSITIVE_INFINITY,
    });
    const body = (s: string, n: number) => Buffer.from(`${s}:${'x'.repeat(n)}`);
    writer.write(record('first', 'early'), { forwarded: body('early', 1000) });
    for (let i = 0; i < 2_000; i++)
      writer.write(record(`r${i}`, `s${i}`), { forwarded: body(`s${i}`, 1000) });
    writer.write(record('again', 'early'), { forwarded: body('early', 1001) });
    const huge = Buffer.alloc(20 * 1024 * 1024, 0x61);
    writer.write(record('huge', 'big'), { forwarded: huge });
    writer.write(record('after-huge', 'big'), { forwarded: Buffer.concat([huge, Buffer.from('b')]) });
    await writer.close();
    const lines = readdirSync(dir)
      .flatMap((n) => readFileSync(join(dir, n), 'utf8').split('\n'))
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { id: string; body: { base?: string } });
    const byId = new Map(lines.map((l) => [l.id, l]));
    // The early session's base was evicted long ago: its next body is stored whole, and still reads back.
    expect(byId.get('again')?.body.base).toBeUndefined();
    expect(byId.get('after-huge')?.body.base).toBeUndefined();
    const read = new Map<string, number>();
    for await (const r of readCaptures([dir])) read.set(r.record.id, r.body?.length ?? -1);
    expect(read.get('again')).toBe(1007);
    expect(read.get('after-huge')).toBe(huge.length + 1);
  });

  it('two writers opening in the same second write two files, and each chain reads back whole', async () => {
    const dir = tmp();
    const clock = new VirtualClock();
    const a = new CaptureWriter({ dir, mode: 'full', clock });
    const b = new CaptureWriter({ dir, mode: 'full', clock });
    // The same session key in both: a delta stored against the other writer's body would read back wrong.
    const body = (who: string, n: number) => Buffer.from(`${'p'.repeat(2000)}${who}:${'x'.repeat(n)}`);
    for (let i = 0; i < 5; i++) {
      a.write(bareRecord(`a${i}`, 'same'), { forwarded: body('a', i) });
      b.write(bareRecord(`b${i}`, 'same'), { forwarded: body('b', i) });
      await Promise.all([a.flush(), b.flush()]);
    }
    await Promise.all([a.close(), b.close()]);
    const files = readdirSync(dir).filter((n) => n.startsWith('capture-'));
    expect(files).toHaveLength(2);
    for (const f of files) {
      const ids = readFileSync(join(dir, f), 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => (JSON.parse(l) as { id: string }).id[0]);
      expect(new Set(ids).size).toBe(1);
    }
    const read = new Map<string, string>();
    for await (const r of readCaptures([dir])) read.set(r.record.id, r.body?.toString() ?? '');
    for (let i = 0; i < 5; i++) {
      expect(read.get(`a${i}`)).toBe(body('a', i).toString());
      expect(read.get(`b${i}`)).toBe(body('b', i).toString());
    }
  });

  it('writes a record that comes after close(), and leaves no file open', async () => {
    const dir = tmp();
    const writer = new CaptureWriter({ dir, mode: 'hashes', clock: new VirtualClock() });
    writer.write(bareRecord('before'));
    await writer.close();
    // An exchange that ended after its wrapper was closed (a body the app read late).
    writer.write(bareRecord('after'));
    await writer.flush();
    await new Promise((r) => setTimeout(r, 50));
    const ids: string[] = [];
    for await (const r of readCaptures([dir])) ids.push(r.record.id);
    expect(ids).toEqual(['before', 'after']);
    const open = readdirSync('/proc/self/fd').flatMap((fd) => {
      try {
        return [readlinkSync(`/proc/self/fd/${fd}`)];
      } catch {
        return [];
      }
    });
    expect(open.filter((f) => f.startsWith(dir))).toEqual([]);
  });
});
