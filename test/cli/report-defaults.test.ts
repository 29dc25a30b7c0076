// `cacheward report` with no path: the default capture folder when it holds captures, else the agents' own
// transcript folders; either way stderr says what it read, and what it left out.

import { cpSync, mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { runBustSession } from '../../src/demo/bust-session.js';
import { cli } from './run-cli.js';

const KEYS = ['XDG_STATE_HOME', 'CLAUDE_CONFIG_DIR', 'CODEX_HOME'] as const;
const saved = Object.fromEntries(KEYS.map((k) => [k, process.env[k]]));
afterEach(() => {
  for (const k of KEYS) {
    if (saved[k] === undefined) delete process.env[k];
    else process.env[k] = saved[k];
  }
});

let demo: string;
beforeAll(async () => {
  demo = (await runBustSession(mkdtempSync(join(tmpdir(), 'cacheward-defaults-')))).dir;
}, 60_000);

/** A HOME with Claude Code's transcript folder, and a state folder that holds captures or not. */
function home(withCaptures: boolean): { state: string; projects: string } {
  const root = mkdtempSync(join(tmpdir(), 'cacheward-defaults-home-'));
  const projects = join(root, '.claude', 'projects');
  mkdirSync(projects, { recursive: true });
  const state = join(root, 'state');
  if (withCaptures) cpSync(demo, join(state, 'cacheward'), { recursive: true });
  // By the variables the agents read (a worker thread's os.homedir() does not follow process.env.HOME).
  process.env.CLAUDE_CONFIG_DIR = join(root, '.claude');
  process.env.CODEX_HOME = join(root, '.codex');
  process.env.XDG_STATE_HOME = state;
  return { state: join(state, 'cacheward'), projects };
}

describe('cacheward report with no path', () => {
  it('reads the captures, and says which agent folders it left out and how to add them', async () => {
    const { state } = home(true);
    const r = await cli(['report', '--json']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toContain(
      `cacheward: reading the captures in ${state}; the agents' own transcripts are not read without --claude-code`,
    );
  });

  it('reads the agents folders when there are no captures, and says so', async () => {
    const { state, projects } = home(false);
    const r = await cli(['report', '--json']);
    expect(r.stderr).toContain(`cacheward: reading ${projects} (no captures in ${state})`);
  });
});
