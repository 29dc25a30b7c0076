// `cacheward report` on the newest Claude Code's transcripts of runs through a flaky provider (the simulator's
// seeded 529s, 429s and mid-stream resets, which the agent retries) against the report on the captures of the
// same runs: every attempt counted, with its status or how it was cut off.

import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AnalysisResult } from '../../src/analyze/analyze-captures.js';
import type { ReadRecord } from '../../src/capture/capture-reader.js';
import { type AgentStack, startAgentStack } from './agent-harness.js';
import { dir, script } from './claude-scenarios.js';
import { recordsOf, reportJson, within1 } from './transcript-parity.js';

const SETUP_MS = 300_000;

/** Input tokens a record's usage says (uncached, read and written). */
function inputOf(r: ReadRecord): number {
  const u = (r.record.usage?.raw ?? {}) as Record<string, unknown>;
  return (
    Number(u.input_tokens ?? 0) +
    Number(u.cache_read_input_tokens ?? 0) +
    Number(u.cache_creation_input_tokens ?? 0)
  );
}

describe('Claude Code (newest) through a flaky provider: its transcripts count every attempt as the captures do', () => {
  let stack: AgentStack;
  let home = '';
  let captures: AnalysisResult;
  let transcripts: AnalysisResult;
  const warnings: string[] = [];

  beforeAll(async () => {
    stack = await startAgentStack({
      script,
      simArgs: ['--faults', '529@0.15,429@0.15,reset-mid-stream@0.15', '--seed', '6'],
    });
    const run = async (prompt: string, cwd: string, args: string[] = []) => {
      const r = await stack.run('claude', { prompt, cwd, args });
      expect(r.exitCode, `${prompt}: ${r.stderr}`).toBe(0);
      home = r.home;
    };
    const loop = dir(stack, 'loop');
    writeFileSync(join(loop, 'notes.txt'), 'the secret is 42\n');
    await run('LOOP-TASK read, count and write', loop, ['--allowedTools', 'Read', 'Bash(wc:*)', 'Write']);
    const resume = dir(stack, 'resume');
    await run('RESUME-TASK first question', resume);
    await run('second question', resume, ['--continue']);
    captures = await reportJson([stack.captureDir]);
    transcripts = await reportJson(['--claude-code'], { HOME: home });
    await recordsOf(join(home, '.claude/projects'), warnings);
  }, SETUP_MS);
  afterAll(() => stack?.close());

  it('the provider failed some attempts, and the agent retried them', () => {
    expect(captures.requests.some((r) => (r.status ?? 0) >= 400)).toBe(true);
    expect(captures.totals.unanswered?.upstream_reset).toBeGreaterThan(0);
  });

  it('counts the same requests, each with its status, and the same cut off', () => {
    expect(transcripts.totals.requests).toBe(captures.totals.requests);
    // A call cut off mid-stream had its headers (200) on the wire; its transcript cannot say so.
    const statuses = (r: AnalysisResult) =>
      r.requests
        .map((q) => q.status ?? 0)
        .filter((s) => s >= 400)
        .sort((a, b) => a - b);
    expect(statuses(transcripts)).toEqual(statuses(captures));
    expect(transcripts.totals.unanswered).toEqual(captures.totals.unanswered);
    expect(transcripts.totals.sessions).toBe(captures.totals.sessions);
    expect(warnings).toEqual([]);
  });

  it("differs in tokens by exactly the cut-off calls' usage, which only the wire saw", async () => {
    const cut = (await recordsOf(stack.captureDir)).filter((r) => r.record.outcome === 'upstream_reset');
    const unseen = cut.reduce((n, r) => n + inputOf(r), 0);
    expect(cut.length).toBeGreaterThan(0);
    expect(within1(transcripts.totals.inputTokens + unseen, captures.totals.inputTokens)).toBe(true);
    // Miss by miss the same causes, but for the cut-off calls' own (what they wrote is priced on the wire only).
    const cutIds = new Set(cut.map((r) => r.record.id));
    const causes = (rows: AnalysisResult['requests']) =>
      [...rows].sort((a, b) => a.time - b.time).flatMap((r) => (r.miss ? [r.miss.cause] : []));
    const onWire = causes(captures.requests.filter((r) => !cutIds.has(r.id)));
    expect(causes(transcripts.requests)).toEqual(onWire);
  });
});

describe("Claude Code (newest) with a subagent through 529s: a subagent's retried attempts are refused calls, as on the wire", () => {
  let stack: AgentStack;
  let captures: AnalysisResult;
  let transcripts: AnalysisResult;

  beforeAll(async () => {
    // Seed 5 refuses a subagent attempt whose retry then succeeds (the case a retry names as its base).
    stack = await startAgentStack({ script, simArgs: ['--faults', '529@0.3', '--seed', '5'] });
    const r = await stack.run('claude', {
      prompt: 'DELEGATE-TASK ask a subagent',
      cwd: dir(stack, 'delegate'),
      args: ['--allowedTools', 'Agent'],
    });
    expect(r.exitCode, r.stderr).toBe(0);
    captures = await reportJson([stack.captureDir]);
    transcripts = await reportJson(['--claude-code'], { HOME: r.home });
    await recordsOf(join(r.home, '.claude/projects'), warnings);
  }, SETUP_MS);
  afterAll(() => stack?.close());

  const warnings: string[] = [];

  it('counts every attempt, the refused ones as turns of no conversation, and the same tokens and causes', () => {
    const refused = (r: AnalysisResult) => r.requests.filter((q) => q.relation === 'none' && !q.usage).length;
    expect(refused(captures)).toBeGreaterThan(0);
    expect(transcripts.totals.requests).toBe(captures.totals.requests);
    expect(refused(transcripts)).toBe(refused(captures));
    expect(transcripts.totals.unanswered).toEqual(captures.totals.unanswered);
    expect(transcripts.totals.inputTokens).toBe(captures.totals.inputTokens);
    expect(transcripts.byCause.map((c) => [c.cause, c.misses])).toEqual(
      captures.byCause.map((c) => [c.cause, c.misses]),
    );
    // Nothing read as "no response though later calls did": every retried attempt was told apart.
    expect(warnings).toEqual([]);
  });
});
