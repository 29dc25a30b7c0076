// The capture writer on a full disk, through the one seam it has to the disk (node:fs/promises' open): a
// file whose writes the disk refuses (ENOSPC) or takes only in part (a short write), as a full tmpfs does.
import { existsSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { bareRecord } from '../fixtures/capture-records.js';

/** What the next capture file's writes do: all written, refused (ENOSPC), or cut short. */
const disk = vi.hoisted(() => ({ mode: 'ok' as 'ok' | 'enospc' | 'short' }));

vi.mock('node:fs/promises', async (importOriginal) => {
  const fs = await importOriginal<typeof import('node:fs/promises')>();
  const open = async (...args: Parameters<typeof fs.open>) => {
    const h = await fs.open(...args);
    if (!String(args[0]).endsWith('.jsonl')) return h;
    const writev = h.writev.bind(h);
    return Object.assign(h, {
      writev: async (buffers: Buffer[]) => {
        if (disk.mode === 'enospc')
          throw Object.assign(new Error('ENOSPC: no space left on device, write'), {
            code: 'ENOSPC',
            errno: -28,
            syscall: 'write',
          });
        if (disk.mode === 'short') {
          const first = buffers[0] as Buffer;
          return writev([first.subarray(0, 100)]).then((r) => ({ ...r, buffers }));
        }
        return writev(buffers);
      },
    });
  };
  return { ...fs, open, default: { ...fs, open } };
});

const { CaptureWriter } = await import('../../src/capture/capture-writer.js');
const { VirtualClock } = await import('../../src/core/clock.js');

describe('the capture writer on a full disk', () => {
  it('says the disk is full once, names the file, states the code once, and names no removed file', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cacheward-full-writer-'));
    const logs: string[] = [];
    disk.mode = 'enospc';
    const w = new CaptureWriter({ dir, mode: 'hashes', clock: new VirtualClock(), log: (l) => logs.push(l) });
    for (let i = 0; i < 3; i++) w.write(bareRecord(`r${i}`, 's'));
    await w.flush();
    const s = w.state();
    expect(s).toMatchObject({ state: 'degraded', written: 0, failed: 3, unmarked: 3 });
    expect(logs).toHaveLength(1);
    const line = logs[0] as string;
    expect(line).toMatch(
      /^capture degraded, traffic continues: the disk is full \(ENOSPC: no space left on device, write\), writing .*capture-.*\.jsonl$/,
    );
    expect(line).not.toContain('ENOSPC: ENOSPC');
    // The empty file it could not write to is removed, and health does not point at it.
    expect(readdirSync(dir)).toEqual([]);
    expect(s.file).toBeUndefined();
    await w.close();
  });

  it('a short write is said as the full disk it is, naming the file; the marker counts once written', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cacheward-full-writer-'));
    const logs: string[] = [];
    disk.mode = 'short';
    const w = new CaptureWriter({ dir, mode: 'hashes', clock: new VirtualClock(), log: (l) => logs.push(l) });
    w.write(bareRecord('cut', 's'));
    await w.flush();
    const s = w.state();
    expect(s).toMatchObject({ state: 'degraded', failed: 1, unmarked: 1 });
    expect(logs[0]).toMatch(
      /^capture degraded, traffic continues: CW_CAPTURE_WRITE: the disk is full: .*capture-.*\.jsonl took 100 of \d+ bytes$/,
    );
    // 100 bytes reached the file: it stays, and health names it.
    expect(s.file && existsSync(s.file)).toBe(true);
    disk.mode = 'ok';
    w.write(bareRecord('after', 's'));
    await w.flush();
    expect(w.state()).toMatchObject({ state: 'ok', written: 1, failed: 1, unmarked: 0 });
    await w.close();
  });

  it('marks the exchanges it lost at the stop, if the disk has room again by then', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cacheward-full-writer-'));
    disk.mode = 'enospc';
    const w = new CaptureWriter({ dir, mode: 'hashes', clock: new VirtualClock() });
    for (let i = 0; i < 2; i++) w.write(bareRecord(`lost${i}`, 's'));
    await w.flush();
    expect(w.state()).toMatchObject({ failed: 2, unmarked: 2 });
    disk.mode = 'ok';
    await w.close();
    expect(w.state().unmarked).toBe(0);
    const files = readdirSync(dir);
    expect(files).toHaveLength(1);
    const lines = readFileSync(join(dir, files[0] as string), 'utf8')
      .trim()
      .split('\n');
    expect(lines.map((l) => JSON.parse(l))).toEqual([
      expect.objectContaining({ cacheward: 'not_captured', exchanges: 2, failed: 2, dropped: 0 }),
    ]);
  });
});
