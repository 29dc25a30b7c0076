// `cacheward proxy` refuses a --state, --state-timeout-ms or --otlp it cannot use: one line, exit 2.

import { mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cli } from './run-cli.js';

// No --dir: the default capture folder, pointed at a folder of this test's own, must stay empty.
const stateHome = mkdtempSync(join(tmpdir(), 'cacheward-xdg-'));
const before = process.env.XDG_STATE_HOME;
beforeAll(() => {
  process.env.XDG_STATE_HOME = stateHome;
});
afterAll(() => {
  if (before === undefined) delete process.env.XDG_STATE_HOME;
  else process.env.XDG_STATE_HOME = before;
});

describe('cacheward proxy state and telemetry options', () => {
  it.each([
    [
      ['--state', 'postgres://db:5432'],
      /--state postgres:\/\/ is not supported: use --state memory or --state redis:\/\/HOST:PORT/,
    ],
    [['--state', 'redis://u:hunter2@h:6379/x'], /database "x" is not a number from 0 to 15/],
    [['--state-timeout-ms', '0'], /--state-timeout-ms 0: a number of milliseconds from 1 to 60000/],
    [
      ['--otlp', 'grpc://collector:4317'],
      /OTLP is exported over HTTP; use an http:\/\/ or https:\/\/ address/,
    ],
  ])('%j', async (args, message) => {
    const r = await cli(['proxy', '--port', '0', ...args]);
    expect(r.code).toBe(2);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(message);
    expect(r.stderr).not.toContain('hunter2');
    // A refused configuration leaves nothing behind (it used to leave an empty capture file).
    expect(readdirSync(stateHome, { recursive: true })).toEqual([]);
  });
});
