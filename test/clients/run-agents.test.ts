// `cacheward run --sim` on the real Claude Code and Codex binaries, offline: one command, no key, no config.
// The agents get only what `run` sets (base URLs, placeholder keys, codex's openai_base_url override).

import { existsSync, mkdirSync, mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PriceTable } from '../../src/analyze/price-table.js';
import { analyzePaths } from '../../src/report/analyze-paths.js';
import { claudeCommand, codexCommand } from './agent-harness.js';
import { type CliResult, cacheward } from './transcript-parity.js';

/** `cacheward run --sim -- AGENT…` with a bare environment: a fresh HOME, no keys, no base URLs. */
async function runAgent(
  agent: string[],
  root = mkdtempSync(join(tmpdir(), 'cacheward-run-agent-')),
  runArgs: string[] = [],
): Promise<CliResult & { dir: string }> {
  const home = join(root, 'home');
  const work = join(root, 'work');
  mkdirSync(home, { mode: 0o700, recursive: true });
  mkdirSync(work, { recursive: true });
  const dir = join(root, 'captures');
  const r = await cacheward(
    ['run', '--sim', '--dir', dir, ...runArgs, '--', ...agent],
    { HOME: home, TERM: 'dumb' },
    {
      cwd: work,
      timeoutMs: 100_000,
    },
  );
  return { ...r, dir };
}

async function summaryMatchesAnalyzer(stderr: string): Promise<void> {
  const line = stderr.split('\n').find((l) => l.trim().startsWith('full report: '));
  expect(line, stderr).toBeDefined();
  const files = (line as string).trim().split(' ').slice(4);
  const result = await analyzePaths(files, { prices: new PriceTable() });
  expect(result.totals.requests).toBeGreaterThan(0);
  expect(stderr).toContain(`cacheward run: ${result.totals.requests} request`);
}

describe('cacheward run --sim on real agents', () => {
  it('runs Claude Code (claude -p) with no key and no config, and leaves nothing in its HOME', async () => {
    const root = mkdtempSync(join(tmpdir(), 'cacheward-run-agent-'));
    const r = await runAgent([...claudeCommand(), '-p', 'Say hi.'], root);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/Simulated reply \d+\./);
    await summaryMatchesAnalyzer(r.stderr);
    // Only cacheward's own state (its local CA) is there: no .claude, no .claude.json.
    expect(readdirSync(join(root, 'home')).filter((n) => n.startsWith('.claude'))).toEqual([]);
  }, 120_000);

  it.each(['newest', 'pinned'] as const)(
    "counts two runs kept in one --agent-home as two sessions in the report on Claude Code's own transcripts (%s)",
    async (version) => {
      // The pinned version's transcript names a call by the response's ids: the simulator's must differ per run.
      const root = mkdtempSync(join(tmpdir(), 'cacheward-run-agent-'));
      const kept = join(root, 'agents');
      for (const prompt of ['Say hi.', 'Say bye.']) {
        const r = await runAgent([...claudeCommand(version), '-p', prompt], root, ['--agent-home', kept]);
        expect(r.code, r.stderr).toBe(0);
        expect(r.stderr).toContain(`the agents' own transcripts: cacheward report ${kept}`);
      }
      // A simulated session never lands among the user's own.
      expect(existsSync(join(root, 'home/.claude'))).toBe(false);
      const warnings: string[] = [];
      const result = await analyzePaths([kept], {
        prices: new PriceTable(),
        onWarning: (w) => warnings.push(w),
      });
      expect(result.totals.sessions).toBe(2);
      expect(warnings.join('\n')).not.toContain('counted once');
    },
    240_000,
  );

  it('runs Codex (codex exec) with no key and no config', async () => {
    const r = await runAgent([...codexCommand(), 'exec', '--skip-git-repo-check', 'Say hi.']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/Simulated reply \d+\./);
    await summaryMatchesAnalyzer(r.stderr);
    // Its empty warm-up on the WebSocket (no input at all) is no miss.
    expect(r.stderr).not.toContain('below_minimum');
  }, 120_000);
});
