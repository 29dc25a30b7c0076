import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { builtCli } from '../suite.js';
import { cli } from './run-cli.js';

const run = promisify(execFile);

describe('cacheward demo', () => {
  it('shows every bundled pair as its documented bust or non-bust and exits 0', async () => {
    const r = await cli(['demo']);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('tools diverge at index 8: `WebFetch` was appended at index 8');
    expect(r.stdout).toContain('`mcp__db__query` was inserted before `Edit`');
    expect(r.stdout).toMatch(/no bust: all [\d,]+ tokens of the earlier request stay cached/);
    expect(r.stdout).not.toContain('expected this pair');
    // Part two: the scripted session's report names its busts.
    expect(r.stdout).toMatch(/cacheward report: 3 sessions, 24 requests/);
    for (const cause of [
      'tools changed',
      'cache expired',
      'fork diverged',
      'model changed',
      'parameters changed',
    ]) {
      expect(r.stdout).toContain(cause);
    }
    // Part three: the same session with fixes costs less, and says which causes went and why.
    const table = r.stdout.slice(r.stdout.indexOf('side by side'));
    const spend = /spend\s+\$([\d.]+)\s+\$([\d.]+)/.exec(table);
    expect(Number(spend?.[2])).toBeLessThan(Number(spend?.[1]));
    expect(table).toMatch(/fork_diverged\s+1 × \$[\d.]+\s+-/);
    expect(table).toContain("fork_diverged is gone: the review fork started from its parent's fix state");
  });

  it('keeps its captures with --captures in folders only their owner can read, and lines its steps up', async () => {
    const root = mkdtempSync(join(tmpdir(), 'cacheward-demo-captures-'));
    const dir = join(root, 'deep', 'c');
    const r = await cli(['demo', '--captures', dir]);
    expect(r.code).toBe(0);
    for (const d of [join(root, 'deep'), dir]) expect(statSync(d).mode & 0o777).toBe(0o700);
    const captures = readdirSync(dir).filter((n) => n.endsWith('.jsonl'));
    expect(captures.length).toBeGreaterThan(0);
    for (const f of captures) expect(statSync(join(dir, f)).mode & 0o777).toBe(0o600);
    // The scripted steps' labels start in one column, the longest session name included.
    const steps = r.stdout
      .split('\n')
      .filter((l) => /^ {2}(main|review-fork|summary-\S+|classifier)\s/.test(l));
    expect(steps.length).toBeGreaterThan(3);
    const column = (l: string) => l.search(/\S/g) + (l.trimStart().match(/^\S+\s+/)?.[0].length ?? 0);
    expect(new Set(steps.map(column)).size).toBe(1);
  });

  it('cites public sources (issue and PR references, public docs) in its "seen in" lines, no local files', async () => {
    const r = await cli(['demo']);
    const seen = r.stdout.split('\n').filter((l) => l.trim().startsWith('seen in:'));
    expect(seen.length).toBeGreaterThanOrEqual(8);
    for (const line of seen) {
      expect(line).not.toMatch(/shared\/|\.txt|\.md\b|\/work\//);
      expect(line).toMatch(/#\d+|docs|agent pattern|Claude Code traffic/);
    }
    expect(r.stdout).toContain('anthropics/claude-code#81967');
    expect(r.stdout).toContain('anthropics/claude-code#76606');
  });

  it('writes the pairs for cacheward diff with --write, and diff agrees with the demo', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cacheward-demo-'));
    const r = await cli(['demo', '--write', dir]);
    expect(r.code).toBe(0);
    const files = readdirSync(dir);
    expect(files).toContain('tool-added-mid-session.a.json');
    const d = await cli([
      'diff',
      join(dir, 'tool-added-mid-session.a.json'),
      join(dir, 'tool-added-mid-session.b.json'),
    ]);
    expect(d.code).toBe(1);
    expect(r.stdout).toContain(d.stdout.split('\n')[0]);
  });
});

describe('the built executable', () => {
  const bin = builtCli();

  it('runs `cacheward demo` without colour under NO_COLOR', async () => {
    expect(existsSync(bin), 'dist/ is built by `npm test` (tsup) before vitest runs').toBe(true);
    const { stdout } = await run(process.execPath, [bin, 'demo'], { env: { ...process.env, NO_COLOR: '1' } });
    expect(stdout).toContain('cacheward demo');
    expect(stdout).not.toContain('\u001b[');
  });

  it('exits 2 with one line on stderr for unreadable input', async () => {
    const err = await run(process.execPath, [
      bin,
      'diff',
      '/nonexistent/a.json',
      '/nonexistent/b.json',
    ]).catch((e) => e);
    expect(err.code).toBe(2);
    expect(err.stderr.trim().split('\n')).toHaveLength(1);
  });
});
