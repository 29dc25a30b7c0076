// Lineage on the real Claude Code (the newest, and the pinned 2.1.195 where it behaves alike): a session
// with an async subagent resumed with `--continue`, then with `--continue --model claude-opus-5` (which
// drops the older replies' thinking), the same without the subagent, and one prompt run twice (two session
// ids). Through `cacheward proxy` into `cacheward sim --script`, then the report on the captures.

import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AnalysisResult, AnalyzedRequest } from '../../src/analyze/analyze-captures.js';
import { PriceTable } from '../../src/analyze/price-table.js';
import type { ReadRecord } from '../../src/capture/capture-reader.js';
import { analyzePaths } from '../../src/report/analyze-paths.js';
import { type AgentStack, type ClaudeVersion, startAgentStack } from '../clients/agent-harness.js';

type Json = Record<string, any>;
const TEST_MS = 240_000;

/** Every reply thinks first: a model switch then leaves the older replies' thinking out of the request. */
const script = {
  conversations: [
    { match: 'LINEAGE-SUB', turns: [{ thinking: 'Count them.', text: 'Subagent found 42.' }] },
    {
      match: 'LINEAGE-ASYNC',
      turns: [
        {
          thinking: 'A subagent should count.',
          text: 'Delegating.',
          tool_calls: [
            {
              name: 'Agent',
              input: {
                description: 'Count the notes',
                prompt: 'LINEAGE-SUB count the notes',
                subagent_type: 'general-purpose',
              },
            },
          ],
        },
        { thinking: 'Wait for it.', text: 'Delegated: done.' },
        { thinking: 'It reported.', text: 'Subagent reported.' },
        { thinking: 'Resumed.', text: 'Continued answer.' },
        { thinking: 'Another model.', text: 'Switched answer.' },
      ],
    },
    {
      match: 'LINEAGE-PLAIN',
      turns: [
        { thinking: 'First.', text: 'First answer.' },
        { thinking: 'Resumed.', text: 'Continued answer.' },
        { thinking: 'Another model.', text: 'Switched answer.' },
      ],
    },
    { match: 'LINEAGE-TWICE', turns: [{ thinking: 'Again.', text: 'Same answer.' }] },
  ],
};

const body = (r: ReadRecord): Json => JSON.parse(String(r.body));
const firstUserText = (b: Json): string =>
  JSON.stringify((b.messages as Json[]).find((m) => m.role === 'user')?.content ?? '');

describe.each<ClaudeVersion>(['newest', 'pinned'])('lineage of real Claude Code (%s) sessions', (claude) => {
  let stack: AgentStack;
  let report: AnalysisResult;
  let records: ReadRecord[];
  /** What the `--continue` run before the switch answered (the pinned version runs its subagent inline). */
  let resumedAnswer = '';
  const rowsOf = (word: string): AnalyzedRequest[] => {
    const ids = new Set(records.filter((r) => firstUserText(body(r)).includes(word)).map((r) => r.record.id));
    return report.requests.filter((row) => ids.has(row.id)).sort((a, b) => a.time - b.time);
  };

  beforeAll(async () => {
    stack = await startAgentStack({ script });
    const run = async (prompt: string, cwd: string, args: string[] = []) => {
      const r = await stack.run('claude', { claude, prompt, cwd, args, timeoutMs: 120_000 });
      expect(r.exitCode, r.stderr).toBe(0);
      return r;
    };
    const at = (name: string) => {
      const d = join(stack.workDir, name);
      mkdirSync(d, { recursive: true });
      return d;
    };
    const withSub = at('async');
    await run('LINEAGE-ASYNC ask a subagent', withSub, ['--allowedTools', 'Agent']);
    resumedAnswer = (await run('second question', withSub, ['--continue'])).stdout.trim();
    await run('third question', withSub, ['--continue', '--model', 'claude-opus-5']);
    const plain = at('plain');
    await run('LINEAGE-PLAIN first question', plain);
    await run('second question', plain, ['--continue']);
    await run('third question', plain, ['--continue', '--model', 'claude-opus-5']);
    const twice = at('twice');
    await run('LINEAGE-TWICE the same prompt', twice);
    await run('LINEAGE-TWICE the same prompt', twice);
    records = await stack.records();
    report = await analyzePaths([stack.captureDir], { prices: new PriceTable() });
  }, 6 * TEST_MS);
  afterAll(() => stack?.close());

  it('the model switch after an async subagent and a resume continues the main line: model_changed, no fork', () => {
    const rows = rowsOf('LINEAGE-ASYNC');
    const sub = rowsOf('LINEAGE-SUB');
    const switched = rows.at(-1) as AnalyzedRequest;
    expect(switched.model).toBe('claude-opus-5');
    // The switch request resends the whole transcript, the older replies without their thinking.
    const sent = body(records.find((r) => r.record.id === switched.id) as ReadRecord);
    expect(resumedAnswer).not.toBe('');
    expect(JSON.stringify(sent.messages)).toContain(resumedAnswer);
    expect(JSON.stringify(sent.messages)).not.toContain('A subagent should count.');
    expect(rows.map((r) => r.relation)).toEqual(['new', ...rows.slice(1).map(() => 'continues')]);
    expect(new Set(rows.map((r) => r.conversation)).size).toBe(1);
    expect(switched.miss?.cause).toBe('model_changed');
    expect(switched.turn).toBe(rows.length);
    expect(switched.parent).toBe(rows.at(-2)?.id);
    expect(sub.length).toBeGreaterThan(0);
    expect(sub[0]?.relation).toBe('sibling');
    const session = report.sessions.find((s) => s.session === switched.session);
    expect(session?.forks).toBe(0);
  });

  it('the same switch without a subagent is model_changed too', () => {
    const rows = rowsOf('LINEAGE-PLAIN');
    expect(rows).toHaveLength(3);
    expect(rows.map((r) => r.relation)).toEqual(['new', 'continues', 'continues']);
    expect(rows[2]?.miss?.cause).toBe('model_changed');
    expect(rows[2]?.miss?.detail.forkOf).toBeUndefined();
  });

  it('one prompt run twice: two sessions, the second started warm from the first, never its fork', () => {
    const rows = rowsOf('LINEAGE-TWICE');
    expect(rows).toHaveLength(2);
    const [first, second] = rows as [AnalyzedRequest, AnalyzedRequest];
    expect(second.session).not.toBe(first.session);
    expect(second.relation).toBe('new');
    expect(second.fork).toBeUndefined();
    expect(second.usage?.cacheRead).toBeGreaterThan(0);
    expect(second.warmFrom).toEqual({ session: first.session, request: first.id });
  });

  it('prices the default model from its own row or, with none (the newest: claude-opus-5-5), the nearest, named', () => {
    const models = new Set(report.requests.map((r) => r.model));
    if (claude === 'newest') {
      expect(models).toContain('claude-opus-5-5');
      expect(report.prices).toContainEqual(
        expect.objectContaining({
          model: 'claude-opus-5-5',
          pricedAs: 'claude-opus-5',
          label: 'Claude Opus 5',
        }),
      );
      for (const r of report.requests.filter((x) => x.model === 'claude-opus-5-5'))
        expect(r.pricedAs, r.id).toBe('claude-opus-5');
    } else expect(report.prices.filter((p) => p.pricedAs)).toEqual([]);
    // The switched-to model has a row of its own.
    for (const r of report.requests.filter((x) => x.model === 'claude-opus-5'))
      expect(r.pricedAs).toBeUndefined();
  });
});
