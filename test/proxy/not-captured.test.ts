// Exchanges the capture could not keep are said where the captures are read, not only on the health
// endpoint: the writer appends a marker when it writes again after dropping (a full queue) or failing (a
// refusing disk), and the report (terminal, JSON, HTML) and the `cacheward run` summary count them.

import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, symlinkSync, unlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readCaptures } from '../../src/capture/capture-reader.js';
import { CaptureWriter } from '../../src/capture/capture-writer.js';
import type { NotCapturedMarker } from '../../src/capture/not-captured.js';
import { VirtualClock } from '../../src/core/clock.js';
import { cli } from '../cli/run-cli.js';
import { bareRecord } from '../fixtures/capture-records.js';
import { builtCli } from '../suite.js';

const tmp = () => mkdtempSync(join(tmpdir(), 'cacheward-not-captured-'));

async function read(dir: string) {
  const markers: NotCapturedMarker[] = [];
  const ids: string[] = [];
  for await (const r of readCaptures([dir], { onNotCaptured: (m) => markers.push(m) })) ids.push(r.record.id);
  return { markers, ids };
}

describe('the capture says what it did not keep', () => {
  it('a burst past the queue bound: a marker with the dropped count, read back, records intact', async () => {
    const dir = tmp();
    const clock = new VirtualClock();
    const writer = new CaptureWriter({ dir, mode: 'hashes', clock, maxQueueBytes: 8 * 1024 });
    await writer.flush();
    for (let i = 0; i < 100; i++) writer.write(bareRecord(`q${i}`, `s${i}`));
    const dropped = writer.state().dropped;
    expect(dropped).toBeGreaterThan(50);
    await writer.flush();
    // Later traffic is written as usual; the drops are said once.
    writer.write(bareRecord('after', 's0'));
    await writer.close();
    const { markers, ids } = await read(dir);
    expect(markers.reduce((n, m) => n + m.exchanges, 0)).toBe(dropped);
    expect(markers.every((m) => m.dropped === m.exchanges && m.failed === 0)).toBe(true);
    expect(ids).toHaveLength(100 - dropped + 1);
    expect(ids.at(-1)).toBe('after');
  });

  it('a disk that refused writes: once it takes them again, a marker with the failed count', async () => {
    const clock = new VirtualClock();
    const dir = tmp();
    const stamp = new Date(clock.now()).toISOString().replace(/[-:]/g, '').replace(/\..*$/, '');
    const names = Array.from({ length: 6 }, (_, i) =>
      join(dir, `capture-${stamp}-${process.pid}-${String(i + 1).padStart(4, '0')}.jsonl`),
    );
    for (const n of names) symlinkSync('/dev/full', n);
    const writer = new CaptureWriter({ dir, mode: 'hashes', clock });
    for (let i = 0; i < 3; i++) {
      writer.write(bareRecord(`f${i}`));
      await writer.flush();
    }
    expect(writer.state()).toMatchObject({ state: 'degraded', failed: 3 });
    for (const n of names) unlinkSync(n);
    writer.write(bareRecord('back'));
    await writer.close();
    const { markers, ids } = await read(dir);
    expect(markers).toHaveLength(1);
    expect(markers[0]).toMatchObject({ cacheward: 'not_captured', exchanges: 3, failed: 3, dropped: 0 });
    expect(ids).toEqual(['back']);
  });

  it('cacheward run and cacheward report (terminal, JSON, HTML) say how many exchanges were not captured', async () => {
    const dir = tmp();
    // Three requests through `cacheward run`; files may hold 300 KB at most (ulimit -f), so the middle one's
    // 1 MB record is refused by the disk, as a full disk would, and the third goes to a new file.
    const agent = `
      const base = process.env.ANTHROPIC_BASE_URL;
      const post = (text) => fetch(base + '/v1/messages', {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': process.env.ANTHROPIC_API_KEY, 'anthropic-version': '2023-06-01', 'x-cacheward-session': 'gen' },
        body: JSON.stringify({ model: 'claude-opus-5', max_tokens: 16, messages: [{ role: 'user', content: text }] }),
      }).then((r) => r.text());
      await post('first question');
      await post('x'.repeat(1024 * 1024));
      await post('third question');
    `;
    const bin = builtCli();
    const args = ['run', '--sim', '--no-warm-up', '--capture', 'full', '--dir', dir, '--', process.execPath];
    const run = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
      const child = spawn(
        'bash',
        [
          '-c',
          'ulimit -f 600; exec "$0" "$@"',
          process.execPath,
          bin,
          ...args,
          '--input-type=module',
          '-e',
          agent,
        ],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      );
      let stderr = '';
      child.stderr.on('data', (d) => {
        stderr += String(d);
      });
      child.on('close', (code) => resolve({ code, stderr }));
    });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toMatch(/cacheward run: 2 requests/);
    expect(run.stderr).toMatch(
      /1 exchange was not captured \(the proxy's capture queue was full, or the disk refused a write\)/,
    );
    const json = await cli(['report', dir, '--json']);
    expect(JSON.parse(json.stdout).generatedFrom).toMatchObject({ records: 2, notCaptured: 1 });
    const text = await cli(['report', dir]);
    expect(text.stdout).toMatch(/^ {2}1 exchange was not captured/m);
    const html = join(tmp(), 'report.html');
    await cli(['report', dir, '--html', html]);
    expect(readFileSync(html, 'utf8')).toContain('1 exchange was not captured');
  }, 60_000);
});
