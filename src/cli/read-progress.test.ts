// The report's progress line: one line over every input file, rewritten in place, cleared at the end, and
// nothing at all when stderr is not a terminal.

import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readProgress } from './read-progress.js';

function files(n: number, size: number): string[] {
  const dir = mkdtempSync(join(tmpdir(), 'cacheward-progress-'));
  return Array.from({ length: n }, (_, i) => {
    const f = join(dir, `s${i}.jsonl`);
    writeFileSync(f, 'x'.repeat(size));
    return f;
  });
}

describe('readProgress', () => {
  it('keeps one line over all the files, never a line per file, and clears it at the end', async () => {
    const list = files(500, 1000);
    const out: string[] = [];
    let t = 0;
    const p = await readProgress(list, { isTTY: true, write: (s) => out.push(s) }, () => t);
    for (const f of list) {
      p?.onProgress(f, 400, 1000);
      p?.onProgress(f, 1000, 1000);
      t += 10;
    }
    p?.done();
    const text = out.join('');
    expect(text).not.toContain('\n');
    // Throttled: 500 files in 5 s of the clock, a rewrite at most every 200 ms.
    expect(out.length).toBeLessThanOrEqual(5_000 / 200 + 2);
    expect(out.at(-2)).toMatch(/read 4\d\d of 500 files, 0\.\d of 0\.5 MB \(9\d%\)$/);
    expect(out.at(-1)).toBe('\r\u001b[K');
  });

  it('counts a file once however often it reports, and never past its size', async () => {
    const list = files(2, 100);
    const out: string[] = [];
    let t = 0;
    const p = await readProgress(list, { isTTY: true, write: (s) => out.push(s) }, () => (t += 1000));
    p?.onProgress(list[0] as string, 100, 100);
    p?.onProgress(list[0] as string, 100, 100);
    p?.onProgress(list[1] as string, 500, 100);
    expect(out.at(-1)).toContain('read 2 of 2 files');
    expect(out.at(-1)).toContain('(100%)');
  });

  it('writes nothing when the stream is not a terminal', async () => {
    const out: string[] = [];
    expect(await readProgress(files(1, 10), { isTTY: false, write: (s) => out.push(s) })).toBeUndefined();
    expect(out).toEqual([]);
  });
});
