// Scores the report against the corpus's ground truth: analyzes each proxy's captures as `cacheward report`
// does, finds every sent request's row by its response id, and tallies right causes, false misses and forks.

import { existsSync } from 'node:fs';
import type { AnalyzedRequest } from '../../../src/analyze/analyze-captures.js';
import { PriceTable } from '../../../src/analyze/price-table.js';
import { readCaptures } from '../../../src/capture/capture-reader.js';
import { analyzePaths } from '../../../src/report/analyze-paths.js';
import type { CorpusRun, SentRequest } from './send-corpus.js';

/** One request: what it should have been called and what the report called it. */
export interface Outcome {
  sent: SentRequest;
  row: AnalyzedRequest | undefined;
  got: string | null;
  right: boolean;
}

export interface CorpusScore {
  outcomes: Outcome[];
  requests: number;
  /** Injected events that must be misses (the 98% floor applies to these). */
  injected: { total: number; right: number };
  /**
   * Requests that must not be misses, or must be the expected cold start (controls, the turns around events,
   * events that cost nothing such as a summary fork): any other answer is a false miss.
   */
  falseMisses: Outcome[];
  /** Main-line requests the report calls a fork. */
  mainForks: Outcome[];
  /** Fork requests the report does not call a fork. */
  missedForks: Outcome[];
}

export async function scoreCorpus(run: CorpusRun): Promise<CorpusScore> {
  const rows = new Map<string, AnalyzedRequest>();
  for (const dir of [run.dirs.hashes, run.dirs.full]) {
    if (!existsSync(dir)) continue;
    const byCapture = new Map<string, string>();
    for await (const r of readCaptures([dir], { bodies: false }))
      if (r.record.responseId) byCapture.set(r.record.id, r.record.responseId);
    const result = await analyzePaths([dir], { prices: new PriceTable() });
    for (const row of result.requests) {
      const response = byCapture.get(row.id);
      if (response) rows.set(response, row);
    }
  }
  const outcomes = run.sent
    .filter((s) => s.plan.kind === 'turn')
    .map((sent): Outcome => {
      const row = rows.get(sent.responseId);
      const got = row?.miss?.cause ?? null;
      return { sent, row, got: row ? got : 'no row', right: !!row && got === sent.plan.expect };
    });
  const missed = (o: Outcome) => o.sent.plan.injected && o.sent.plan.expect !== null;
  const injected = outcomes.filter(missed);
  return {
    outcomes,
    requests: outcomes.length,
    injected: { total: injected.length, right: injected.filter((o) => o.right).length },
    falseMisses: outcomes.filter((o) => !missed(o) && !o.right),
    mainForks: outcomes.filter((o) => o.sent.plan.line === 'main' && o.row?.relation === 'fork'),
    missedForks: outcomes.filter((o) => o.sent.plan.line === 'fork' && o.row?.relation !== 'fork'),
  };
}

const pct = (a: number, b: number) => (b ? `${((100 * a) / b).toFixed(1)}%` : '-');

/** Per event: injected requests, how many got the right cause, and what the wrong ones got. */
export function accuracyTable(score: CorpusScore, by: 'event' | 'event+scheme' = 'event'): string {
  const groups = new Map<string, { total: number; right: number; wrong: Map<string, number> }>();
  for (const o of score.outcomes) {
    if (!o.sent.plan.injected) continue;
    const p = o.sent.plan;
    const key = by === 'event' ? p.event : `${p.event} ${p.scheme}/${p.format}`;
    const g = groups.get(key) ?? { total: 0, right: 0, wrong: new Map() };
    g.total++;
    if (o.right) g.right++;
    else {
      const k = `${p.expect ?? 'none'} → ${o.got ?? 'none'}`;
      g.wrong.set(k, (g.wrong.get(k) ?? 0) + 1);
    }
    groups.set(key, g);
  }
  const lines = [...groups.entries()]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, g]) => {
      const wrong = [...g.wrong.entries()].map(([w, c]) => `${w} ×${c}`).join(', ');
      return `${k.padEnd(by === 'event' ? 34 : 58)} ${String(g.right).padStart(4)}/${String(g.total).padEnd(4)} ${pct(g.right, g.total).padStart(6)}${wrong ? `  wrong: ${wrong}` : ''}`;
    });
  return lines.join('\n');
}

/** The wrong answers one by one, with where they were, for a failing run. */
export function describeWrong(list: readonly Outcome[], limit = 40): string {
  return list
    .slice(0, limit)
    .map((o) => {
      const p = o.sent.plan;
      const m = o.row?.miss;
      const detail = m
        ? ` (${JSON.stringify({ change: m.detail.change, evidence: m.detail.evidence, idle: m.detail.idleSeconds })})`
        : '';
      return `${p.session} [${p.line}${p.injected ? ', event' : ''}] turn ${o.row?.turn ?? '?'} ${o.row?.relation ?? '?'}: expected ${p.expect ?? 'none'}, got ${o.got ?? 'none'}${detail}`;
    })
    .join('\n');
}

/** The whole summary: totals, the per-event table and the wrong answers. */
export function summary(score: CorpusScore): string {
  const wrongInjected = score.outcomes.filter((o) => o.sent.plan.injected && !o.right);
  return [
    `${score.requests} requests; injected events ${score.injected.right}/${score.injected.total} right (${pct(score.injected.right, score.injected.total)}); ` +
      `false misses ${score.falseMisses.length} (${((1000 * score.falseMisses.length) / Math.max(1, score.requests)).toFixed(2)} per 1,000); ` +
      `main-line forks ${score.mainForks.length}; forks not found ${score.missedForks.length}`,
    accuracyTable(score, 'event+scheme'),
    wrongInjected.length ? `wrong causes:\n${describeWrong(wrongInjected)}` : '',
    score.falseMisses.length ? `false misses:\n${describeWrong(score.falseMisses)}` : '',
    score.mainForks.length ? `main line called a fork:\n${describeWrong(score.mainForks)}` : '',
    score.missedForks.length ? `forks not called a fork:\n${describeWrong(score.missedForks)}` : '',
  ]
    .filter(Boolean)
    .join('\n\n');
}
