// A path the library is given to read that does not exist or cannot be read is a CachewardError (CW_INPUT) with
// the one line the CLI prints for it, never Node's raw ENOENT and its stack. In-process; writes only temp folders.

import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { analyzePaths, CachewardError, PriceTable, readCaptures } from '../../src/index.js';
import { cli } from '../cli/run-cli.js';

const tmp = () => mkdtempSync(join(tmpdir(), 'cacheward-unreadable-'));
const prices = new PriceTable();

async function rejection(p: Promise<unknown>): Promise<CachewardError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(CachewardError);
  const e = err as CachewardError;
  expect(e.code).toBe('CW_INPUT');
  expect(e.message).not.toContain('\n');
  return e;
}

async function readAll(paths: string[]): Promise<void> {
  for await (const _ of readCaptures(paths)) {
    // read to the end
  }
}

describe('analyzePaths and readCaptures on a path they cannot read', () => {
  it('a path that does not exist: CW_INPUT, the line `cacheward report` prints', async () => {
    const missing = join(tmp(), 'does-not-exist');
    const e = await rejection(analyzePaths([missing], { prices }));
    expect(e.message).toMatch(
      new RegExp(`^${missing}: no such file or folder; pass the capture-\\*\\.jsonl files`),
    );
    expect((await rejection(readAll([missing]))).message).toBe(e.message);
    // The CLI says the very same line (one message, not derived twice).
    const r = await cli(['report', missing]);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(`cacheward: ${e.message}`);
  });

  it("the doc's sample with no ~/.claude/projects", async () => {
    // A home with no Claude Code folder (the path itself, not HOME: worker threads keep the process's home).
    const projects = join(tmp(), '.claude/projects');
    const e = await rejection(analyzePaths([projects], { prices }));
    expect(e.message).toContain(`${projects}: no such file or folder`);
  });

  it('a path below a file: cannot read, with the system error named once', async () => {
    const file = join(tmp(), 'a-file');
    writeFileSync(file, 'x');
    const e = await rejection(analyzePaths([join(file, 'captures')], { prices }));
    expect(e.message).toMatch(/: cannot read: ENOTDIR: not a directory, stat /);
  });

  it.skipIf(process.getuid?.() === 0)('a file and a folder it may not read', async () => {
    const dir = tmp();
    const file = join(dir, 'capture-20260101T000000-1-0001.jsonl');
    writeFileSync(file, '{}\n');
    chmodSync(file, 0o000);
    expect((await rejection(analyzePaths([file], { prices }))).message).toMatch(/cannot read: EACCES/);
    chmodSync(dir, 0o000);
    try {
      await rejection(analyzePaths([dir], { prices }));
    } finally {
      chmodSync(dir, 0o700);
    }
  });
});
