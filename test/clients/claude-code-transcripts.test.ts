// `cacheward report` on the newest Claude Code's own transcripts (HOME/.claude/projects, written by the runs
// below, never by hand) against the same report on `cacheward proxy --capture full`'s captures of the same
// runs: every request rebuilt byte for byte, the same requests, tokens, sessions and causes, miss by miss.

import { appendFileSync, existsSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AnalysisResult } from '../../src/analyze/analyze-captures.js';
import type { ReadRecord } from '../../src/capture/capture-reader.js';
import { type AgentStack, startAgentStack } from './agent-harness.js';
import { dir, mcpFixture, script } from './claude-scenarios.js';
import {
  cacheward,
  causeOf,
  matchCalls,
  recordsOf,
  reportJson,
  sameBlocks,
  sessionTotals,
  within1,
} from './transcript-parity.js';

const SETUP_MS = 300_000;

/** The capture's body as the transcript can rebuild it: the billing line's three hex digits and `metadata` aside. */
function asRebuildable(wire: string): string {
  const body = JSON.parse(wire);
  delete body.metadata;
  body.system[0].text = body.system[0].text.replace(/(cc_version=[0-9.]+)\.[0-9a-f]{3};/, '$1.xxx;');
  // Claude Code sends compact JSON: the capture's bytes are this very string.
  expect(JSON.stringify(JSON.parse(wire))).toBe(wire);
  return JSON.stringify(body);
}

/** Where two strings first differ, with a little of each around it (a whole body is too long to show). */
function firstDifference(a: string, b: string): string {
  let i = 0;
  while (i < a.length && a[i] === b[i]) i++;
  return i === a.length && i === b.length
    ? 'equal'
    : `at byte ${i}: ${JSON.stringify(a.slice(i - 60, i + 60))} against ${JSON.stringify(b.slice(i - 60, i + 60))}`;
}

/**
 * Each transcript record's capture record: the same session and the same blocks (a subagent's calls share its
 * session and run beside the main line's), paired one to one in the order sent. A refused call's retries have
 * the same blocks and differ only in `thinking.display` (Claude Code drops it on a 400 and puts it back), a few
 * milliseconds apart: the nearest start would pair a retry with its neighbour under load. With no such record,
 * the nearest start in the session (to show what differs).
 */
function pairWithCaptures(
  records: ReadRecord[],
  captures: ReadRecord[],
): Map<ReadRecord, ReadRecord | undefined> {
  const byStart = (a: ReadRecord, b: ReadRecord) => a.record.times.start - b.record.times.start;
  const unused = new Set([...captures].sort(byStart));
  const pairs = new Map<ReadRecord, ReadRecord | undefined>();
  for (const t of [...records].sort(byStart)) {
    const mine = captures.filter((c) => c.record.session.key === t.record.session.key);
    const same = [...unused].find(
      (c) => c.record.session.key === t.record.session.key && sameBlocks(t, c).same,
    );
    if (same) unused.delete(same);
    const distance = (c: ReadRecord) => Math.abs(c.record.times.start - t.record.times.start);
    pairs.set(t, same ?? mine.sort((a, b) => distance(a) - distance(b))[0]);
  }
  return pairs;
}

function expectSameReport(captures: AnalysisResult, transcripts: AnalysisResult): void {
  expect(transcripts.totals.requests).toBe(captures.totals.requests);
  expect(transcripts.totals.sessions).toBe(captures.totals.sessions);
  expect(within1(transcripts.totals.inputTokens, captures.totals.inputTokens)).toBe(true);
  expect(within1(transcripts.totals.readTokens, captures.totals.readTokens)).toBe(true);
  expect(within1(transcripts.totals.writtenTokens, captures.totals.writtenTokens)).toBe(true);
  const a = sessionTotals(captures);
  const b = sessionTotals(transcripts);
  expect([...b.keys()].sort()).toEqual([...a.keys()].sort());
  for (const [session, s] of a) {
    const t = b.get(session);
    expect(t?.requests, session).toBe(s.requests);
    expect(within1(t?.input ?? 0, s.input), session).toBe(true);
    expect(within1(t?.read ?? 0, s.read), session).toBe(true);
    expect(within1(t?.written ?? 0, s.written), session).toBe(true);
  }
}

describe('Claude Code (newest): report on its transcripts equals report on the captures of the same runs', () => {
  let stack: AgentStack;
  let home = '';
  let captures: AnalysisResult;
  let transcripts: AnalysisResult;

  beforeAll(async () => {
    stack = await startAgentStack({ script });
    const run = async (prompt: string, cwd: string, args: string[] = [], extra = {}) => {
      const r = await stack.run('claude', { prompt, cwd, args, ...extra });
      expect(r.exitCode, `${prompt}: ${r.stderr}`).toBe(0);
      home = r.home;
      return r;
    };
    // A tool loop.
    const loop = dir(stack, 'loop');
    writeFileSync(join(loop, 'notes.txt'), 'the secret is 42\n');
    await run('LOOP-TASK read, count and write', loop, ['--allowedTools', 'Read', 'Bash(wc:*)', 'Write']);
    // `--continue`, `--resume <session>`, and `--resume <session> --fork-session` (a new session that starts
    // from a copy of the old one's lines).
    const resume = dir(stack, 'resume');
    const first = await run('RESUME-TASK first question', resume);
    await run('second question', resume, ['--continue']);
    const projects = join(first.home, '.claude/projects');
    const [folder] = readdirSync(projects).filter((f) => f.endsWith('-resume'));
    const [file] = readdirSync(join(projects, folder as string)).filter((f) => f.endsWith('.jsonl'));
    const session = (file as string).replace(/\.jsonl$/, '');
    await run('third question', resume, ['--resume', session]);
    await run('fourth question', resume, ['--resume', session, '--fork-session']);
    // A subagent (run in the background, beside the main line).
    await run('DELEGATE-TASK ask a subagent', dir(stack, 'delegate'), ['--allowedTools', 'Agent']);
    // An MCP server whose tool list grows (loaded through ToolSearch).
    const log = join(stack.root, 'claude-search-mcp.log');
    appendFileSync(log, '');
    await run(
      'TOOLSEARCH-TASK grow the server',
      dir(stack, 'search-grow'),
      ['--allowedTools', 'ToolSearch', 'mcp__fixture__grow', 'mcp__fixture__lookup', 'mcp__fixture__extra_1'],
      { mcpServers: mcpFixture(log) },
    );
    // A model switch on resume.
    const sw = dir(stack, 'switch');
    await run('SWITCH-TASK hello', sw);
    await run('now on another model', sw, ['--continue', '--model', 'claude-opus-4-8']);
    // A switch to a model that refuses the session's system messages: the API answers 400 to every retry,
    // and the transcript's error line says so.
    const refused = dir(stack, 'refused');
    await run('SWITCH-TASK hello', refused);
    const r = await stack.run('claude', {
      prompt: 'now on a model that refuses',
      cwd: refused,
      args: ['--continue', '--model', 'claude-sonnet-5'],
    });
    expect(r.stdout).toContain('API Error: 400');
    // Two sessions of one project at once.
    const both = dir(stack, 'interleave');
    await Promise.all(
      ['A', 'B'].map((x) => run(`INTERLEAVE-${x} echo`, both, ['--allowedTools', 'Bash(echo:*)'])),
    );
    captures = await reportJson([stack.captureDir]);
    transcripts = await reportJson(['--claude-code'], { HOME: home });
  }, SETUP_MS);
  afterAll(() => stack?.close());

  it('rebuilds every request from its records: the same bytes, blocks, identities and byte offsets', async () => {
    const wire = await recordsOf(stack.captureDir);
    const warnings: string[] = [];
    const rebuilt = await recordsOf(join(home, '.claude/projects'), warnings);
    expect(warnings).toEqual([]);
    expect(rebuilt).toHaveLength(wire.length);
    const pairs = pairWithCaptures(rebuilt, wire);
    for (const t of rebuilt) {
      const c = pairs.get(t);
      expect(c, t.record.id).toBeDefined();
      expect(t.body, `${t.record.id} was not rebuilt exactly`).toBeDefined();
      expect(firstDifference(String(t.body), asRebuildable(String(c?.body))), t.record.id).toBe('equal');
      const same = sameBlocks(t, c as ReadRecord);
      expect(same.same, same.why).toBe(true);
      expect(t.record.prefix?.unrecorded).toBeUndefined();
    }
  });

  it('counts the same requests, sessions and input, read and written tokens', () => {
    expect(captures.totals.requests).toBeGreaterThanOrEqual(20);
    expectSameReport(captures, transcripts);
    // The subagent's calls are in its own file, under its session's label: one session per run's session
    // (the fork is one of its own).
    expect(transcripts.sessions.length).toBe(9);
    // The refused calls (each retry) are counted as the proxy counts them: turns of no conversation.
    const refused = transcripts.requests.filter((r) => r.status === 400);
    expect(refused.length).toBeGreaterThan(0);
    expect(refused.length).toBe(captures.requests.filter((r) => r.status === 400).length);
    expect(refused.every((r) => r.relation === 'none')).toBe(true);
  });

  it('names the same cause for every call, miss by miss, at the same block and byte', () => {
    const calls = matchCalls(captures, transcripts);
    for (const { capture, transcript } of calls) {
      expect(transcript, `no transcript call for ${capture.id}`).toBeDefined();
      expect(causeOf(transcript), `${capture.session} turn ${capture.turn}`).toBe(causeOf(capture));
      expect(transcript?.relation).toBe(capture.relation);
      if (!capture.miss) continue;
      const m = transcript?.miss;
      expect(within1(m?.rewrittenTokens ?? 0, capture.miss.rewrittenTokens)).toBe(true);
      expect(m?.detail.byteOffset).toBe(capture.miss.detail.byteOffset);
      expect(m?.detail.blockIndex).toBe(capture.miss.detail.blockIndex);
      expect(m?.detail.change).toEqual(capture.miss.detail.change);
    }
    const causes = calls.map((c) => causeOf(c.capture));
    // The model switch is named from the rebuilt requests, exactly as from the captures.
    expect(causes).toContain('model_changed');
    expect(transcripts.byCause).toEqual(captures.byCause);
  });

  it('serves every form of the report from transcripts: --html, --per-session --fail-on, whatif', async () => {
    const html = join(stack.root, 'transcripts.html');
    const env = { HOME: home };
    const page = await cacheward(['report', '--claude-code', '--html', html], env);
    expect(page.code, page.stderr).toBe(0);
    expect(existsSync(html)).toBe(true);
    const gate = await cacheward(['report', '--claude-code', '--per-session', '--fail-on', 'misses>0'], env);
    expect(gate.code).toBe(1);
    const pass = await cacheward(['report', '--claude-code', '--fail-on', 'hit-rate<1'], env);
    expect(pass.code).toBe(0);
    const whatif = await cacheward(['whatif', '--claude-code', '--ttl', '1h', '--json'], env);
    expect(whatif.code, whatif.stderr).toBe(0);
    const onCaptures = await cacheward(['whatif', stack.captureDir, '--ttl', '1h', '--json']);
    expect(JSON.parse(whatif.stdout).baseCost).toBeCloseTo(JSON.parse(onCaptures.stdout).baseCost, 6);
    expect(JSON.parse(whatif.stdout).altCost).toBeCloseTo(JSON.parse(onCaptures.stdout).altCost, 6);
    // The transcripts beside the captures of the same runs: each call counted once.
    const mixed = await reportJson([stack.captureDir, join(home, '.claude/projects')]);
    expectSameReport(captures, mixed);
  });

  it('shows no message text in the report', async () => {
    const r = await cacheward(['report', '--claude-code', '--json'], { HOME: home });
    for (const secret of ['the secret is 42', 'LOOP-TASK', 'second question', 'COMPACTED-SUMMARY'])
      expect(r.stdout).not.toContain(secret);
  });
});

describe('Claude Code (newest): a compaction, which its transcript records but for the call that wrote the summary', () => {
  let stack: AgentStack;
  let home = '';
  let captures: AnalysisResult;
  let transcripts: AnalysisResult;
  let stderr = '';

  beforeAll(async () => {
    stack = await startAgentStack({ script });
    const cwd = dir(stack, 'compact');
    for (const [prompt, args] of [
      ['COMPACT-TASK first question', []],
      ['/compact', ['--continue']],
      ['after the compaction', ['--continue']],
    ] as Array<[string, string[]]>) {
      const r = await stack.run('claude', { prompt, cwd, args });
      expect(r.exitCode, r.stderr).toBe(0);
      home = r.home;
    }
    captures = await reportJson([stack.captureDir]);
    const r = await cacheward(['report', '--json', '--claude-code'], { HOME: home });
    expect(r.code, r.stderr).toBe(0);
    transcripts = JSON.parse(r.stdout);
    stderr = r.stderr;
  }, SETUP_MS);
  afterAll(() => stack?.close());

  it('says where the compaction is and that its call is not counted; everything else is the same', () => {
    expect(stderr).toMatch(/\.jsonl:\d+: a compaction \(manual\): Claude Code does not record the API call/);
    expect(captures.totals.requests).toBe(3);
    expect(transcripts.totals.requests).toBe(2);
    const calls = matchCalls(captures, transcripts);
    const missing = calls.filter((c) => !c.transcript);
    expect(missing).toHaveLength(1);
    const compaction = missing[0]?.capture;
    // What the transcripts lack is that call's tokens, no more.
    expect(transcripts.totals.inputTokens).toBe(
      captures.totals.inputTokens - (compaction?.usage?.inputTotal ?? 0),
    );
    expect(transcripts.totals.readTokens).toBe(
      captures.totals.readTokens - (compaction?.usage?.cacheRead ?? 0),
    );
    expect(transcripts.totals.writtenTokens).toBe(
      captures.totals.writtenTokens - (compaction?.usage?.cacheWrite ?? 0),
    );
    const [first, , after] = calls;
    expect(causeOf(first?.transcript)).toBe(causeOf(first?.capture));
    // After it, the captures compare the new context with the compaction call, the transcripts with the call
    // before it (the one they hold): see docs/transcripts.md.
    expect(['cold_start', 'messages_edited']).toContain(causeOf(after?.transcript));
  });
});

describe('Claude Code (pinned 2.1.195): messages and usage only, and what that cannot tell apart', () => {
  let stack: AgentStack;
  let home = '';
  let captures: AnalysisResult;
  let transcripts: AnalysisResult;

  beforeAll(async () => {
    stack = await startAgentStack({ script });
    const run = async (prompt: string, cwd: string, args: string[] = []) => {
      const r = await stack.run('claude', { claude: 'pinned', prompt, cwd, args });
      expect(r.exitCode, `${prompt}: ${r.stderr}`).toBe(0);
      home = r.home;
    };
    const loop = dir(stack, 'loop');
    writeFileSync(join(loop, 'notes.txt'), 'the secret is 42\n');
    await run('LOOP-TASK read, count and write', loop, ['--allowedTools', 'Read', 'Bash(wc:*)', 'Write']);
    const resume = dir(stack, 'resume');
    await run('RESUME-TASK first question', resume);
    await run('second question', resume, ['--continue']);
    await run('DELEGATE-TASK ask a subagent', dir(stack, 'delegate'), ['--allowedTools', 'Agent']);
    captures = await reportJson([stack.captureDir]);
    transcripts = await reportJson(['--claude-code'], { HOME: home });
  }, SETUP_MS);
  afterAll(() => stack?.close());

  it('counts the same requests, sessions and tokens from the usage alone', async () => {
    expectSameReport(captures, transcripts);
    const records = await recordsOf(join(home, '.claude/projects'));
    expect(records.length).toBe(captures.totals.requests);
    for (const r of records) {
      expect(r.record.prefix?.unrecorded).toEqual(['tools', 'system', 'params', 'injected']);
      expect(r.body).toBeUndefined();
    }
  });

  it('names every cause it can see, and where it cannot, where the read ended and what could not be told apart', () => {
    let located = 0;
    for (const { capture, transcript } of matchCalls(captures, transcripts)) {
      expect(transcript, capture.id).toBeDefined();
      const seen = capture.miss?.cause;
      if (seen === 'tools_changed' || seen === 'system_changed' || seen === 'params_changed') {
        // `--continue` changed the Bash tool's description: inside what the transcript does not record.
        const m = transcript?.miss;
        expect(m?.cause).toBe('unexplained');
        expect(m?.detail.unrecorded?.inside).toBe(true);
        expect(m?.detail.unrecorded?.couldBe).toContain(seen);
        expect(m?.detail.unrecorded?.readTokens).toBe(capture.usage?.cacheRead);
        expect(m?.sentence).toMatch(
          /the cached prefix ended after ~[\d,]+ tokens: inside tools, system, parameters or .*, which were not recorded; .* could not be told apart/,
        );
        expect(within1(m?.rewrittenTokens ?? 0, capture.miss?.rewrittenTokens ?? 0)).toBe(true);
        located++;
      } else expect(causeOf(transcript), `${capture.session} turn ${capture.turn}`).toBe(causeOf(capture));
    }
    expect(located).toBe(1);
  });
});
