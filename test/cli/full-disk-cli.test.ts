// The built CLI on a disk that cannot take what it writes: a file-size limit (ulimit -f, which cuts a write short
// as a full disk does, then refuses the rest) and, where mount is allowed, a full tmpfs.
import { spawnSync } from 'node:child_process';
import {
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { builtCli } from '../suite.js';
import { fullCapture } from './captures.js';

const bin = builtCli();

/** Runs `cacheward ARGS > out` in bash after `prefix` (a ulimit). */
function toFile(args: string[], out: string, prefix = '') {
  const r = spawnSync('bash', ['-c', `${prefix} exec "$0" "$@" > "${out}"`, process.execPath, bin, ...args], {
    encoding: 'utf8',
  });
  return { code: r.status, stderr: r.stderr };
}

describe('stdout to a file that cannot take it all', () => {
  it('report --json cut short: one line naming the file, exit 2 (was: exit 0 and a cut file)', async () => {
    const { dir } = await fullCapture();
    const out = join(mkdtempSync(join(tmpdir(), 'cacheward-stdout-')), 'report.json');
    // 1 KB: the report's one write is cut short, as on a nearly full disk.
    const r = toFile(['report', dir, '--json'], out, 'ulimit -f 1;');
    expect(statSync(out).size).toBe(1024);
    expect(r.code).toBe(2);
    expect(r.stderr.trim().split('\n')).toEqual([
      expect.stringMatching(
        new RegExp(
          `^cacheward: cannot write to stdout \\(${out}\\): .* after 1024 of \\d+ bytes; the output there is cut short$`,
        ),
      ),
    ]);
  });

  it('report --html FILE that cannot be written whole leaves the report there before as it was, and no temp', async () => {
    const { dir } = await fullCapture();
    const folder = mkdtempSync(join(tmpdir(), 'cacheward-html-'));
    const html = join(folder, 'report.html');
    writeFileSync(html, '<p>the good report of yesterday</p>\n');
    // 1 KB: the new report's write is cut short, as on a nearly full disk.
    const r = toFile(['report', dir, '--html', html], join(tmpdir(), 'ignored.txt'), 'ulimit -f 1;');
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(
      new RegExp(`^cacheward: --html ${html}: cannot write: EFBIG: .*; nothing there was changed\\n$`),
    );
    expect(readFileSync(html, 'utf8')).toBe('<p>the good report of yesterday</p>\n');
    expect(readdirSync(folder)).toEqual(['report.html']);
  });

  it('says the disk is full on a full tmpfs (skipped where mount is not allowed: it needs root or CAP_SYS_ADMIN)', async (ctx) => {
    const { dir } = await fullCapture();
    const mnt = mkdtempSync(join(tmpdir(), 'cacheward-tmpfs-'));
    // Mounted in the test and unmounted in it: a filtered or failed run leaves no mount behind.
    if (spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', mnt]).status !== 0) ctx.skip();
    try {
      // Filled but for a few KB: the report's write is cut short, then refused.
      spawnSync('dd', ['if=/dev/zero', `of=${join(mnt, 'fill')}`, 'bs=1k', 'count=60']);
      mkdirSync(join(mnt, 'out'));
      const out = join(mnt, 'out', 'report.json');
      const r = toFile(['report', dir, '--json'], out);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(
        /^cacheward: cannot write to stdout \(.*report\.json\): the disk is full: cannot write \(ENOSPC: no space left on device, write\) after \d+ of \d+ bytes; the output there is cut short\n$/,
      );
      expect(readFileSync(out).length).toBeLessThan(60 * 1024);
    } finally {
      spawnSync('umount', [mnt]);
    }
  });
});

describe('report --html to what is not a plain file', () => {
  it('writes through a symlink (the file it names is replaced, the link stays) and to /dev/stdout', async () => {
    const { dir } = await fullCapture();
    const folder = mkdtempSync(join(tmpdir(), 'cacheward-html-link-'));
    mkdirSync(join(folder, 'share'));
    writeFileSync(join(folder, 'share', 'target.html'), 'OLD');
    symlinkSync(join('share', 'target.html'), join(folder, 'link.html'));
    const r = spawnSync(process.execPath, [bin, 'report', dir, '--html', join(folder, 'link.html')], {
      encoding: 'utf8',
    });
    expect(r.status).toBe(0);
    expect(lstatSync(join(folder, 'link.html')).isSymbolicLink()).toBe(true);
    expect(readFileSync(join(folder, 'share', 'target.html'), 'utf8')).toMatch(/^<!doctype html>/i);
    expect(readdirSync(join(folder, 'share'))).toEqual(['target.html']);
    // A pipe: the page goes down it (it was renamed over by a temp file, or refused for /dev's permissions).
    const piped = spawnSync(
      'bash',
      ['-c', '"$0" "$@" | cat', process.execPath, bin, 'report', dir, '--html', '/dev/stdout'],
      {
        encoding: 'utf8',
      },
    );
    expect(piped.status).toBe(0);
    expect(piped.stdout).toMatch(/<!doctype html>/i);
  });
});

describe('run --sim --agent-home DIR on a full disk', () => {
  it('one line naming the file it could not write, exit 2, no temp or lock file left (was: a stack)', () => {
    const home = mkdtempSync(join(tmpdir(), 'cacheward-home-'));
    const dir = mkdtempSync(join(tmpdir(), 'cacheward-home-captures-'));
    // A zero file-size limit: every write fails, the first being the folder's lock file.
    const r = toFile(
      ['run', '--sim', '--no-warm-up', '--dir', dir, '--agent-home', home, '--', 'true'],
      '/dev/null',
      'ulimit -f 0;',
    );
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(
      new RegExp(
        `^cacheward: run --sim: cannot set up the agents' homes in --agent-home ${home}: writing ${home}/\\.cacheward-run\\.pid: EFBIG: file too large, write\\n$`,
      ),
    );
    expect(readdirSync(home)).toEqual([]);
  });
});
