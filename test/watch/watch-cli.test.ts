// `cacheward watch` as a command: its URL as the first stdout line, loopback only, the proxy's admission on its
// routes (a foreign Host or a page on another site refused), options checked before anything listens, a folder
// waited for with one line, and a clean stop on SIGINT.

import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cli } from '../cli/run-cli.js';
import { healthOf, metricsOf, startWatchCli, type WatchProcess, waitFor } from './watch-harness.js';

/** A GET with exactly these headers (node:http lets a test set Host), its status and body. */
function get(
  url: string,
  path: string,
  headers: Record<string, string>,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(`${url}${path}`, { headers }, (res) => {
      let body = '';
      res.on('data', (d) => {
        body += d;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('cacheward watch, the command', () => {
  let root = '';
  let watch: WatchProcess;

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'cacheward-watch-cli-'));
    watch = await startWatchCli([join(root, 'later')], { HOME: root });
  });

  afterAll(async () => {
    await watch?.stop();
    rmSync(root, { recursive: true, force: true });
  });

  it('prints its URL first, on 127.0.0.1, then what it follows and where the page is', async () => {
    await waitFor('the live page line', async () =>
      watch.stdout().includes('live page:') ? true : undefined,
    );
    const lines = watch.stdout().split('\n');
    expect(lines[0]).toBe(`cacheward watch listening on ${watch.url}`);
    expect(lines[1]).toBe(`  following: ${join(root, 'later')}`);
    expect(lines[2]).toMatch(
      /^ {2}shown: calls that started since \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \(--since 1h\)/,
    );
    expect(lines[3]).toBe(`  live page: ${watch.url}/_cacheward/`);
  });

  it('waits for a folder that does not exist yet with one line, and follows it once it appears', async () => {
    const later = join(root, 'later');
    await waitFor('the waiting line', async () =>
      watch.stderr().includes(`cacheward watch: waiting for ${later}: it does not exist yet`)
        ? true
        : undefined,
    );
    expect((await healthOf(watch.url)).transcripts.waiting).toEqual([later]);
    mkdirSync(join(later, 'project'), { recursive: true });
    await waitFor('the folder taken up', async () =>
      (await healthOf(watch.url)).transcripts.waiting.length === 0 ? true : undefined,
    );
    expect(watch.stderr()).toContain(`cacheward watch: ${later} appeared: following it`);
    expect(watch.stderr().split('waiting for')).toHaveLength(2);
  });

  it("serves the proxy's page, state and metrics, and refuses what the proxy's own routes refuse", async () => {
    const page = await get(watch.url, '/_cacheward/', {});
    expect(page.status).toBe(200);
    expect(page.body).toContain('<title>cacheward live</title>');
    const state = await get(watch.url, '/_cacheward/state', {});
    expect(JSON.parse(state.body)).toMatchObject({ requests: [], totals: { requests: 0 } });
    const port = new URL(watch.url).port;
    const rebound = await get(watch.url, '/_cacheward/state', { host: `rebind.attacker.example:${port}` });
    expect(rebound.status).toBe(403);
    expect(rebound.body).toContain('Host \\"rebind.attacker.example\\" is not allowed');
    const foreign = await get(watch.url, '/_cacheward/state', { origin: 'https://evil.example' });
    expect(foreign.status).toBe(403);
    const crossSite = await get(watch.url, '/_cacheward/events', { 'sec-fetch-site': 'cross-site' });
    expect(crossSite.status).toBe(403);
    // A link to the page from elsewhere opens it (a navigation gives the linking page nothing).
    const navigation = await get(watch.url, '/_cacheward/', {
      'sec-fetch-site': 'cross-site',
      'sec-fetch-mode': 'navigate',
    });
    expect(navigation.status).toBe(200);
    expect((await get(watch.url, '/v1/messages', {})).status).toBe(404);
    const metrics = await (await fetch(`${watch.url}/_cacheward/metrics`)).text();
    expect(metrics).toMatch(/cacheward_refused_total\{reason="host"\} 1/);
    expect(metrics).toMatch(/cacheward_refused_total\{reason="origin"\} 2/);
    expect((await metricsOf(watch.url)).requests).toBe(0);
  });

  it('stops on SIGINT with exit 0', async () => {
    watch.child.kill('SIGINT');
    expect(await watch.exited).toBe(0);
    expect(watch.stderr()).toContain('cacheward watch: stopped; 0 calls shown');
  });
});

describe('cacheward watch, the first read', () => {
  /** A projects folder of 201 sessions of one prompt each (no call yet), last written at `at`. */
  function sessions(at: Date): string {
    const root = mkdtempSync(join(tmpdir(), 'cacheward-watch-cli-'));
    const project = join(root, 'projects', '-work-project');
    mkdirSync(project, { recursive: true });
    for (let i = 0; i < 201; i++) {
      const id = `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`;
      const file = join(project, `${id}.jsonl`);
      const line = {
        type: 'user',
        uuid: id,
        parentUuid: null,
        sessionId: id,
        timestamp: at.toISOString(),
        message: { role: 'user', content: 'a prompt' },
      };
      writeFileSync(file, `${JSON.stringify(line)}\n`);
      utimesSync(file, at, at);
    }
    return root;
  }

  const firstRead =
    /^cacheward watch: read 201 transcripts changed since \S+ \(0 calls shown, 0 earlier read for context\); following 200 of them for new lines \(the most followed at once; the others are read again when they change\)\n$/;

  // Last written a minute ago, or just now (younger than the settle time): all read, 200 followed.
  it.each([
    ['written a minute ago', 60_000, ['--settle', '1s']],
    ['every file written just now', 0, []],
  ])('says how many transcripts it read and follows no more than the bound (%s)', async (_, age, extra) => {
    const root = sessions(new Date(Date.now() - (age as number)));
    const w = await startWatchCli([join(root, 'projects'), ...(extra as string[])], { HOME: root });
    try {
      const line = await waitFor(
        'the first-read line',
        async () => w.stderr().match(/cacheward watch: read .*\n/)?.[0],
      );
      expect(line).toMatch(firstRead);
      expect((await healthOf(w.url)).transcripts).toMatchObject({ files: 200, read: 201 });
    } finally {
      await w.stop();
      rmSync(root, { recursive: true, force: true });
    }
  });
});

describe('cacheward watch, options', () => {
  it('refuses a duration it cannot read, before listening', async () => {
    const r = await cli(['watch', '--since', '5x', '/nonexistent']);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe('cacheward: --since 5x: not a duration; pass e.g. 30s, 15m, 1h or 2d (0 for none)');
    expect(r.stdout).toBe('');
    const settle = await cli(['watch', '--settle', '-1s', '/nonexistent']);
    expect(settle.code).toBe(2);
  });

  it('says a port in use in one line', async () => {
    const busy = createServer();
    await new Promise<void>((r) => busy.listen(0, '127.0.0.1', () => r()));
    const { port } = busy.address() as AddressInfo;
    try {
      const r = await cli(['watch', '--port', String(port), '/nonexistent']);
      expect(r.code).toBe(2);
      expect(r.stderr).toBe(
        `cacheward: --port ${port}: already in use (another cacheward watch?); pass another port, or --port 0 for any free one`,
      );
    } finally {
      busy.close();
    }
  });
});
