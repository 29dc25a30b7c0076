// `cacheward run --sim` on a full disk, in-process, through the capture writer's one seam to the disk
// (node:fs/promises' open): capture files whose writes the disk refuses (ENOSPC) after `okWrites` writes.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';

/** The capture folder whose files' writes fail, after `okWrites` that work. */
const disk = vi.hoisted(() => ({ dir: '', okWrites: 0 }));

vi.mock('node:fs/promises', async (importOriginal) => {
  const fs = await importOriginal<typeof import('node:fs/promises')>();
  const open = async (...args: Parameters<typeof fs.open>) => {
    const h = await fs.open(...args);
    if (!disk.dir || !String(args[0]).startsWith(disk.dir) || !String(args[0]).endsWith('.jsonl')) return h;
    const writev = h.writev.bind(h);
    return Object.assign(h, {
      writev: async (buffers: Buffer[]) => {
        if (disk.okWrites-- > 0) return writev(buffers);
        throw Object.assign(new Error('ENOSPC: no space left on device, write'), {
          code: 'ENOSPC',
          syscall: 'write',
        });
      },
    });
  };
  return { ...fs, open, default: { ...fs, open } };
});

const { cli } = await import('./run-cli.js');
const agent = join(import.meta.dirname, 'sdk-agent.mjs');

describe('cacheward run on a full disk', () => {
  it('says every exchange was lost, summarizes nothing, and exits 2 though the agent exited 0', async () => {
    disk.okWrites = 0;
    const dir = mkdtempSync(join(tmpdir(), 'cacheward-run-full-'));
    disk.dir = dir;
    const r = await cli(['run', '--sim', '--dir', dir, '--', process.execPath, agent, '0']);
    expect(r.stderr).toMatch(
      /^cacheward run: nothing to summarize: \d+ exchanges were not captured \(the disk is full \(ENOSPC: no space left on device, write\), writing .*\); free disk space and run again for a whole summary$/m,
    );
    expect(r.stderr).not.toContain('no request reached the proxy');
    expect(r.code).toBe(2);
  });

  it('says the figures cover only what was captured, how many were not, and exits 2', async () => {
    disk.okWrites = 1;
    const dir = mkdtempSync(join(tmpdir(), 'cacheward-run-full-'));
    disk.dir = dir;
    const r = await cli(['run', '--sim', '--dir', dir, '--', process.execPath, agent, '0']);
    expect(r.stderr).toMatch(/^cacheward run: 1 request in 1 session captured \(only these: see below\)$/m);
    const lost = /^ {2}(\d+) exchanges were not captured \(/m.exec(r.stderr);
    expect(lost, r.stderr).not.toBeNull();
    expect(Number(lost?.[1])).toBeGreaterThan(1);
    expect(r.stderr).toMatch(
      new RegExp(
        `full report: .* \\(it cannot count the ${lost?.[1]} not captured that the disk had no room to mark\\)$`,
        'm',
      ),
    );
    expect(r.code).toBe(2);
  });
});
