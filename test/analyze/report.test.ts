import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import type { AnalysisResult, AnalyzedRequest } from '../../src/analyze/analyze-captures.js';
import { PriceTable } from '../../src/analyze/price-table.js';
import { type BustSessionResult, runBustSession } from '../../src/demo/bust-session.js';
import type { CaptureRecord } from '../../src/record/capture-record.js';
import { analyzePaths } from '../../src/report/analyze-paths.js';
import { renderTerminalReport } from '../../src/report/terminal-report.js';
import { cli } from '../cli/run-cli.js';

let run: BustSessionResult;
let result: AnalysisResult;
let bySession: Map<string, AnalyzedRequest[]>;

beforeAll(async () => {
  run = await runBustSession(mkdtempSync(join(tmpdir(), 'cacheward-report-')));
  result = await analyzePaths([run.dir], { prices: new PriceTable() });
  bySession = new Map();
  for (const r of result.requests) bySession.set(r.session, [...(bySession.get(r.session) ?? []), r]);
}, 60_000);

/** The analyzed request of each step, matched by session and turn order. */
function stepRows(): Array<{ label: string; expect: string | undefined; row: AnalyzedRequest | undefined }> {
  const seen = new Map<string, number>();
  return run.steps.map((s) => {
    const i = seen.get(s.session) ?? 0;
    seen.set(s.session, i + 1);
    return { label: s.label, expect: s.expect, row: bySession.get(s.session)?.[i] };
  });
}

describe('cacheward report names every cause', () => {
  it('gives each scripted bust its cause, and no cause where nothing broke', () => {
    for (const { label, expect: cause, row } of stepRows()) {
      expect(row, label).toBeDefined();
      expect(row?.miss?.cause, label).toBe(cause);
    }
  });

  const miss = (cause: string) => result.misses.find((m) => m.cause === cause)!;

  it('names the tool, its index and the byte offset of a tools change', () => {
    const m = miss('tools_changed');
    expect(m.detail.change).toMatchObject({
      type: 'tools',
      added: [{ name: 'mcp__db__query', index: 4, before: 'Edit' }],
    });
    expect(m.detail.byteOffset).toBeGreaterThan(0);
    expect(m.sentence).toMatch(
      /tools changed: `mcp__db__query` was inserted before `Edit` \(byte [\d,]+\); [\d,]+ tokens re-written; \$[\d.]+ wasted/,
    );
  });

  it('names what a fork sent differently from its parent', () => {
    const m = miss('fork_diverged');
    expect(m.detail.forkOf).toBeDefined();
    expect(m.detail.change).toMatchObject({
      type: 'tools',
      added: [{ name: 'WebFetch' }, { name: 'skill_manage' }],
    });
    expect(result.requests.find((r) => r.id === m.requestId)?.fork?.parent).toBe(m.detail.forkOf);
  });

  it('gives the idle gap against the TTL', () => {
    expect(miss('ttl_expired').detail).toMatchObject({ idleSeconds: 360, ttlSeconds: 300 });
  });

  it('gives the system block, the edited message, the model and the parameter', () => {
    expect(miss('system_changed').detail.change).toMatchObject({
      type: 'system',
      edit: 'edited',
      partIndex: 0,
    });
    expect(miss('messages_edited').detail.change).toMatchObject({
      type: 'messages',
      messageIndex: 4,
      edit: 'removed',
    });
    expect(miss('model_changed').detail.change).toEqual({
      type: 'params',
      invalidates: 'tools',
      params: [{ name: 'model', before: 'claude-opus-5', after: 'claude-fable-5' }],
    });
    expect(miss('params_changed').detail.change).toMatchObject({
      type: 'params',
      invalidates: 'messages',
      params: [{ name: 'thinking', before: undefined, after: { type: 'enabled', budget_tokens: 4096 } }],
    });
  });

  it('gives the lookback distance, the minimum against the prefix, and the unexplained read', () => {
    expect(miss('lookback_exceeded').detail.lookbackDistance).toBeGreaterThan(20);
    expect(miss('below_minimum').detail).toMatchObject({ minimumTokens: 4096 });
    expect(miss('below_minimum').detail.prefixTokens).toBeLessThan(4096);
    const u = miss('unexplained');
    expect(u.detail.expectedReadTokens).toBeGreaterThan(0);
    expect(u.detail.actualReadTokens).toBe(0);
  });

  it('prices every miss from the dated table: re-written tokens at the write price minus the read price', () => {
    const m = miss('tools_changed');
    // Claude Opus 5: $6.25 write, $0.50 read per million (2026-08-20).
    expect(m.waste).toBeCloseTo((m.rewrittenTokens * (6.25 - 0.5)) / 1e6, 10);
    expect(result.prices.map((p) => p.date)).toContain('2026-08-20');
    const total = result.byCause.reduce((t, c) => t + c.waste, 0);
    expect(result.totals.waste).toBeCloseTo(total, 10);
  });

  it('tells a summary fork that reads its parent from a standalone summary that re-renders it', () => {
    const fork = stepRows().find((s) => s.label === 'a summary fork that reuses the parent prefix')?.row;
    expect(fork?.relation).toBe('fork');
    const standalone = bySession.get('summary-standalone')?.[0];
    expect(fork?.miss).toBeUndefined();
    expect(fork?.usage?.cacheRead).toBeGreaterThan((fork?.usage?.inputTotal ?? 0) * 0.95);
    // It shares no history with anything: a new conversation, written whole (the cache reads the tools only).
    expect(standalone?.relation).toBe('new');
    expect(standalone?.miss?.cause).toBe('cold_start');
    expect(standalone?.usage?.cacheRead).toBeLessThan((standalone?.usage?.inputTotal ?? 1) * 0.4);
  });

  it('says whether provider diagnostics agree with its cause', async () => {
    const { analyzeRecords } = await import('../../src/analyze/analyze-captures.js');
    const { readCaptures } = await import('../../src/capture/capture-reader.js');
    const records: CaptureRecord[] = [];
    for await (const r of readCaptures([run.dir], { bodies: false })) records.push(r.record);
    const tools = result.misses.find((m) => m.cause === 'tools_changed')!;
    const ttl = result.misses.find((m) => m.cause === 'ttl_expired')!;
    const model = result.misses.find((m) => m.cause === 'model_changed')!;
    for (const r of records) {
      if (r.id === tools.requestId)
        r.diagnostics = { cache_miss_reason: { type: 'tools_changed', cache_missed_input_tokens: 9000 } };
      if (r.id === ttl.requestId) r.diagnostics = null;
      if (r.id === model.requestId)
        r.diagnostics = { cache_miss_reason: { type: 'system_changed', cache_missed_input_tokens: 9000 } };
    }
    async function* feed() {
      yield* records;
    }
    const again = await analyzeRecords(feed(), { prices: new PriceTable() });
    const by = (id: string) => again.misses.find((m) => m.requestId === id)?.providerDiagnosis;
    expect(by(tools.requestId)).toEqual({ reason: 'tools_changed', agrees: true });
    expect(by(ttl.requestId)).toEqual({ reason: 'none', agrees: true });
    expect(by(model.requestId)).toEqual({ reason: 'system_changed', agrees: false });
  });

  it('keeps the hit rate token-weighted and the sessions apart', () => {
    const t = result.totals;
    expect(t.hitRate).toBeCloseTo(t.readTokens / t.inputTokens, 10);
    expect(result.sessions.map((s) => s.session).sort()).toEqual([
      'classifier',
      'main',
      'summary-standalone',
    ]);
    expect(result.sessions.find((s) => s.session === 'main')?.concurrent).toBe(1);
    // The review and summary forks (under the main line's label) are its forks; no main-line request is
    // one, even when a sibling shares one more block with it.
    expect(result.sessions.find((s) => s.session === 'main')?.forks).toBe(2);
    const forks = stepRows()
      .filter((s) => s.row?.fork)
      .map((s) => s.label);
    expect(forks.sort()).toEqual([
      'a review fork with a wider tools[]',
      'a summary fork that reuses the parent prefix',
    ]);
  });
});

describe('report output', () => {
  it('prints a summary and the costliest misses, one line each', async () => {
    const r = await cli(['report', run.dir, '--misses', '20']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^cacheward report: 3 sessions, \d+ requests/);
    expect(r.stdout).toMatch(/hit rate [\d.]+% \(token-weighted/);
    expect(r.stdout).toMatch(/costliest misses \(13 in all\):/);
    expect(r.stdout).toMatch(
      /main, turn \d+, \d\d:\d\d:\d\d\.\d{3} — tools changed: `mcp__db__query` was inserted before `Edit`/,
    );
  });

  it('prints the whole result as JSON with --json', async () => {
    const r = await cli(['report', '--json', run.dir]);
    const j = JSON.parse(r.stdout) as AnalysisResult;
    expect(j.version).toBe(1);
    expect(j.misses.length).toBe(result.misses.length);
    expect(Object.keys(j.totals)).toEqual(
      expect.arrayContaining(['hitRate', 'cost', 'waste', 'unpricedModels']),
    );
  });

  it('flags unknown models instead of pricing them at zero, and takes prices from a file', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cacheward-prices-'));
    const file = join(dir, 'prices.json');
    writeFileSync(
      file,
      JSON.stringify([
        {
          provider: 'anthropic',
          model: 'claude-opus-5',
          input: 50,
          write5m: 62.5,
          write1h: 100,
          read: 5,
          output: 250,
          date: '2026-11-30',
          source: 'test',
        },
      ]),
    );
    const priced = await analyzePaths([run.dir], { prices: new PriceTable([]) });
    const bare = await analyzePaths([run.dir], { prices: new PriceTable([], []) });
    expect(bare.totals.cost).toBe(0);
    expect(bare.totals.unpricedModels).toEqual(['claude-fable-5', 'claude-haiku-4-5', 'claude-opus-5']);
    expect(bare.misses.every((m) => m.waste === null)).toBe(true);
    const plain = { bold: String, dim: String, yellow: String, green: String };
    const notPriced = (a: AnalysisResult) =>
      renderTerminalReport(a, plain).find((l) => l.includes('not priced'));
    expect(notPriced(bare)).toMatch(/claude-opus-5 \(24 requests\)$/);
    const one = {
      ...bare,
      totals: { ...bare.totals, unpricedModels: ['claude-opus-5'], unpricedRequests: 1 },
    };
    expect(notPriced(one)).toMatch(/: claude-opus-5 \(1 request\)$/);
    const r = await cli(['report', '--prices', file, run.dir]);
    expect(r.code).toBe(0);
    const j = JSON.parse(
      (await cli(['report', '--json', '--prices', file, run.dir])).stdout,
    ) as AnalysisResult;
    expect(j.totals.waste).toBeGreaterThan(priced.totals.waste * 2);
    const bad = join(dir, 'bad.json');
    writeFileSync(bad, '[{"provider":"anthropic","model":"x","input":1}]');
    const e = await cli(['report', '--prices', bad, run.dir]);
    expect(e.code).toBe(2);
    expect(e.stderr).toMatch(/bad\.json: \[0\]\.write5m/);
  });

  it('skips a torn line with a warning that names the file and line', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cacheward-torn-'));
    const file = join(dir, 'capture-torn.jsonl');
    const src = readFileSync(
      join(run.dir, (await import('node:fs')).readdirSync(run.dir)[0] as string),
      'utf8',
    );
    writeFileSync(file, `${src}{"v":1,"id":"x","ti`);
    const lines = src.split('\n').filter(Boolean).length;
    const r = await cli(['report', file]);
    expect(r.code).toBe(0);
    expect(r.stderr).toContain(`${file}:${lines + 1}: skipped a torn or invalid line`);
    expect(r.stdout).toMatch(/1 torn or invalid line skipped/);
  });

  it('exits 2 naming a path that does not exist', async () => {
    const r = await cli(['report', '/nonexistent/captures']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/\/nonexistent\/captures: no such file or folder/);
  });

  it('answers what a 1-hour TTL would have cost, per session', async () => {
    const r = await cli(['whatif', run.dir, '--ttl', '1h', '--json']);
    expect(r.code).toBe(0);
    const j = JSON.parse(r.stdout) as {
      baseCost: number;
      altCost: number;
      sessions: Array<{ session: string; base: number; alt: number }>;
    };
    expect(j.sessions.map((s) => s.session)).toContain('main');
    // The 6-minute break no longer expires the cache: fewer re-writes, but writes cost 2x instead of 1.25x.
    expect(j.altCost).not.toBe(j.baseCost);
    expect((await cli(['whatif', run.dir, '--ttl', '2h'])).code).toBe(2);
  });
});
