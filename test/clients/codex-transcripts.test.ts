// `cacheward report` on Codex's own session rollouts (CODEX_HOME/sessions, written by the runs below, never by
// hand) against the same report on the proxy's captures of the same runs: `exec`, then `exec resume`; and a
// turn the provider refuses.

import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AnalysisResult } from '../../src/analyze/analyze-captures.js';
import { type AgentStack, startAgentStack } from './agent-harness.js';
import { script } from './codex-scenarios.js';
import { causeOf, matchCalls, recordsOf, reportJson, sessionTotals, within1 } from './transcript-parity.js';

/** A working folder of the stack's with the `a.txt` the scripts patch. */
function folderWithA(stack: AgentStack, name: string): string {
  const cwd = join(stack.workDir, name);
  mkdirSync(cwd, { recursive: true });
  writeFileSync(join(cwd, 'a.txt'), 'hello\n');
  return cwd;
}

describe('Codex: report on its rollouts equals report on the captures of the same runs', () => {
  let stack: AgentStack;
  let codexHome = '';
  let captures: AnalysisResult;
  let transcripts: AnalysisResult;

  beforeAll(async () => {
    stack = await startAgentStack({ script });
    const cwd = folderWithA(stack, 'edit');
    const runs: Array<[string, string[]]> = [
      ['RESUMED-EDIT-TASK patch a.txt', ['-s', 'workspace-write']],
      ['and one more question', ['resume', '--last']],
    ];
    for (const [prompt, args] of runs) {
      const r = await stack.run('codex', { prompt, cwd, args });
      expect(r.exitCode, r.stderr).toBe(0);
      codexHome = join(r.home, 'codex');
    }
    const other = folderWithA(stack, 'other');
    const r = await stack.run('codex', {
      prompt: 'EDIT-TASK patch a.txt',
      cwd: other,
      args: ['-s', 'workspace-write'],
    });
    expect(r.exitCode, r.stderr).toBe(0);
    captures = await reportJson([stack.captureDir]);
    transcripts = await reportJson(['--codex'], { HOME: stack.root, CODEX_HOME: codexHome });
  }, 300_000);
  afterAll(() => stack?.close());

  it('counts the same requests, sessions and tokens', async () => {
    expect(captures.totals.requests).toBe(5);
    expect(transcripts.totals.requests).toBe(captures.totals.requests);
    expect(transcripts.totals.sessions).toBe(2);
    expect(transcripts.totals.sessions).toBe(captures.totals.sessions);
    for (const k of ['inputTokens', 'readTokens', 'writtenTokens'] as const)
      expect(within1(transcripts.totals[k], captures.totals[k]), k).toBe(true);
    expect(sessionTotals(transcripts)).toEqual(sessionTotals(captures));
    for (const r of await recordsOf(join(codexHome, 'sessions')))
      expect(r.record.prefix?.unrecorded).toEqual(['tools', 'params']);
  });

  it('names the same cause for every call, the resumed one included', () => {
    const calls = matchCalls(captures, transcripts);
    for (const { capture, transcript } of calls) {
      expect(transcript, capture.id).toBeDefined();
      expect(causeOf(transcript), `${capture.session} turn ${capture.turn}`).toBe(causeOf(capture));
      expect(transcript?.relation).toBe(capture.relation);
    }
    expect(transcripts.byCause).toEqual(captures.byCause);
  });
});

describe('Codex: a turn the provider refuses is a request on its rollout as on the captures', () => {
  let stack: AgentStack;
  let codexHome = '';
  let captures: AnalysisResult;
  let transcripts: AnalysisResult;

  beforeAll(async () => {
    stack = await startAgentStack({ script });
    const cwd = folderWithA(stack, 'failed');
    // The second call of the turn gets a 400 (the turn fails), and so does the resumed turn's one call.
    for (const [prompt, args] of [
      ['FAILED-TURN-TASK patch a.txt', ['-s', 'workspace-write']],
      ['now continue', ['resume', '--last']],
    ] as Array<[string, string[]]>) {
      const r = await stack.run('codex', { prompt, cwd, args });
      expect(r.stderr).toMatch(/bad request forever/);
      codexHome = join(r.home, 'codex');
    }
    captures = await reportJson([stack.captureDir]);
    transcripts = await reportJson(['--codex'], { HOME: stack.root, CODEX_HOME: codexHome });
  }, 300_000);
  afterAll(() => stack?.close());

  it('counts the refused calls as requests, refused, with no usage', async () => {
    expect(captures.totals.requests).toBe(3);
    expect(captures.requests.filter((r) => r.status === 400)).toHaveLength(2);
    expect(transcripts.totals.requests).toBe(captures.totals.requests);
    for (const k of ['inputTokens', 'readTokens', 'writtenTokens'] as const)
      expect(within1(transcripts.totals[k], captures.totals[k]), k).toBe(true);
    expect(transcripts.totals.unanswered).toEqual(captures.totals.unanswered);
    expect(transcripts.byCause).toEqual(captures.byCause);
    // The rollout says the error, not its status: the records are refused (`error`), with no status made up.
    const refused = (await recordsOf(join(codexHome, 'sessions'))).filter((r) => !r.record.usage);
    expect(refused).toHaveLength(2);
    for (const { record } of refused) {
      expect(record.outcome).toBe('error');
      expect(record.status).toBeUndefined();
      expect(record.error).toBe('invalid_request_error: bad request forever');
    }
    const calls = matchCalls(captures, transcripts);
    for (const { capture, transcript } of calls) {
      expect(transcript, capture.id).toBeDefined();
      expect(transcript?.relation).toBe(capture.relation);
    }
  });
});
