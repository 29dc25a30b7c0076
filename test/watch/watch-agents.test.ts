// `cacheward watch` follows the real agents' transcript folders while the agents write them (the newest Claude
// Code in a throwaway HOME, Codex in its CODEX_HOME, both offline against `cacheward sim --script`), and ends
// with the same rows and miss metrics as `cacheward report` on the same transcripts once the runs are done.

import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AnalysisResult } from '../../src/analyze/analyze-captures.js';
import { type AgentStack, startAgentStack } from '../clients/agent-harness.js';
import { script as claudeScript, dir } from '../clients/claude-scenarios.js';
import { script as codexScript } from '../clients/codex-scenarios.js';
import { reportJson } from '../clients/transcript-parity.js';
import {
  expectSameAsReport,
  healthOf,
  startWatchCli,
  stateWith,
  type WatchProcess,
  waitFor,
} from './watch-harness.js';

describe('cacheward watch on the real agents as they write: the same rows and misses as the report', () => {
  let stack: AgentStack;
  let watch: WatchProcess;
  let projects = '';
  let sessions = '';
  let report: AnalysisResult;
  let firstRun = 0;

  beforeAll(async () => {
    stack = await startAgentStack({
      script: (dirs: { root: string; workDir: string }) => ({
        conversations: [...claudeScript(dirs).conversations, ...codexScript.conversations],
      }),
    });
    // The folders the agents will write (the harness's homes): they do not exist before the first run.
    projects = join(stack.root, 'claude-home/.claude/projects');
    sessions = join(stack.root, 'codex-home/codex/sessions');
    watch = await startWatchCli([projects, sessions, '--log', 'json'], { HOME: stack.root });
    await waitFor('the waiting lines', async () =>
      watch.stderr().includes(`waiting for ${sessions}`) ? true : undefined,
    );
    const claude = async (prompt: string, cwd: string, args: string[] = []) => {
      const r = await stack.run('claude', { prompt, cwd, args });
      expect(r.exitCode, `${prompt}: ${r.stderr}`).toBe(0);
    };
    // A tool loop, shown as it runs: its first call is on the page before the run ends.
    const loop = dir(stack, 'loop');
    writeFileSync(join(loop, 'notes.txt'), 'the secret is 42\n');
    await claude('LOOP-TASK read, count and write', loop, ['--allowedTools', 'Read', 'Bash(wc:*)', 'Write']);
    firstRun = (await stateWith(watch.url, 4)).totals.requests;
    // `--continue` extends the session's file.
    const resume = dir(stack, 'resume');
    await claude('RESUME-TASK first question', resume);
    await claude('second question', resume, ['--continue']);
    // A subagent: its file appears in a new folder, <session>/subagents/.
    await claude('DELEGATE-TASK ask a subagent', dir(stack, 'delegate'), ['--allowedTools', 'Agent']);
    // Two sessions of one project written at once.
    const both = dir(stack, 'interleave');
    await Promise.all(
      ['A', 'B'].map((x) => claude(`INTERLEAVE-${x} echo`, both, ['--allowedTools', 'Bash(echo:*)'])),
    );
    // A model switch on resume (a miss the report names), and a model that refuses the session (400s).
    const sw = dir(stack, 'switch');
    await claude('SWITCH-TASK hello', sw);
    await claude('now on another model', sw, ['--continue', '--model', 'claude-opus-4-8']);
    const refused = dir(stack, 'refused');
    await claude('SWITCH-TASK hello', refused);
    const r = await stack.run('claude', {
      prompt: 'now on a model that refuses',
      cwd: refused,
      args: ['--continue', '--model', 'claude-sonnet-5'],
    });
    expect(r.stdout).toContain('API Error: 400');
    // Codex: `exec`, then `exec resume` appending to the same rollout.
    const cwd = join(stack.workDir, 'edit');
    mkdirSync(cwd, { recursive: true });
    writeFileSync(join(cwd, 'a.txt'), 'hello\n');
    for (const [prompt, args] of [
      ['RESUMED-EDIT-TASK patch a.txt', ['-s', 'workspace-write']],
      ['and one more question', ['resume', '--last']],
    ] as const) {
      const r = await stack.run('codex', { prompt, cwd, args: [...args] });
      expect(r.exitCode, r.stderr).toBe(0);
    }
    report = await reportJson([projects, sessions]);
  }, 300_000);

  afterAll(async () => {
    await watch?.stop();
    await stack?.close();
  });

  it('waits for folders that do not exist yet, with one line each, and takes them up when they appear', () => {
    const err = watch.stderr();
    expect(err.split(`waiting for ${projects}: it does not exist yet`)).toHaveLength(2);
    expect(err.split(`waiting for ${sessions}: it does not exist yet`)).toHaveLength(2);
    expect(err).toContain(`${projects} appeared: following it`);
    expect(err).toContain(`${sessions} appeared: following it`);
    expect(firstRun).toBe(4);
  });

  it('shows every call the report counts, with the same sessions, relations, turns, tokens and causes', async () => {
    expect(report.totals.requests).toBe(26);
    expect(report.totals.sessions).toBe(8);
    expect(report.byCause.map((c) => c.cause).sort()).toEqual(['cold_start', 'model_changed']);
    await expectSameAsReport(watch.url, report);
    const health = await healthOf(watch.url);
    expect(health.transcripts.waiting).toEqual([]);
    expect(health.transcripts.calls.shown).toBe(report.totals.requests);
    expect(health.transcripts.calls.context).toBe(0);
    // Seven sessions' files, the subagent's and the Codex rollout.
    expect(health.transcripts.files).toBe(9);
  });

  it('shows names, kinds, positions and counts, never a word of the transcripts', async () => {
    const seen = [
      JSON.stringify(await stateWith(watch.url, report.totals.requests)),
      await (await fetch(`${watch.url}/_cacheward/metrics`)).text(),
      JSON.stringify(await healthOf(watch.url)),
      watch.stderr(),
    ].join('\n');
    for (const text of [
      'LOOP-TASK',
      'the secret is 42',
      'Loop done',
      'Subagent found 42',
      'second question',
      'Patched a.txt',
      'RESUMED-EDIT-TASK',
    ])
      expect(seen).not.toContain(text);
  });

  it('logs one JSON line per call (--log json) and no warning, as the report gave none', () => {
    const rows = watch
      .stderr()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { id: string });
    expect(new Set(rows.map((r) => r.id)).size).toBe(report.totals.requests);
    expect(rows).toHaveLength(report.totals.requests);
    expect(watch.stderr()).not.toContain('warning');
  });

  it('stops on SIGTERM with exit 0, saying what it showed', async () => {
    expect(await watch.stop()).toBe(0);
    expect(watch.stderr()).toContain(`cacheward watch: stopped; ${report.totals.requests} calls shown`);
  });
});
