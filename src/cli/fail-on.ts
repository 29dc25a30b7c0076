// `report --fail-on 'waste>5' --fail-on 'hit-rate<80'`: thresholds over an analysis, for CI over captured traffic.
// It reads the analyzer's totals and sessions only; a threshold it cannot check fails loudly, never passes.

import type { AnalysisResult } from '../analyze/analyze-captures.js';
import { formatUsd } from '../analyze/describe-miss.js';
import { InputError } from '../core/errors.js';
import { EXIT_FINDING, EXIT_OK, EXIT_USAGE } from './exit-codes.js';
import { type CliIO, styles } from './io.js';

export type Metric = 'waste' | 'spend' | 'hit-rate' | 'misses';
type Op = '>' | '>=' | '<' | '<=';

/** One parsed threshold: `waste>5` is waste above $5; `hit-rate<80` is a hit rate below 80%. */
export interface Threshold {
  text: string;
  metric: Metric;
  op: Op;
  value: number;
}

const METRICS: Record<Metric, { unit: 'usd' | 'percent' | 'count'; what: string }> = {
  waste: { unit: 'usd', what: 'waste in dollars' },
  spend: { unit: 'usd', what: 'spend in dollars' },
  'hit-rate': { unit: 'percent', what: 'token-weighted hit rate in percent' },
  misses: { unit: 'count', what: 'cache misses (cold starts not counted)' },
};

export const FAIL_ON_HELP =
  "a threshold that fails the run (exit 1) when crossed: waste>DOLLARS, spend>DOLLARS, hit-rate<PERCENT, misses>N (also >=, <=); repeat for more, e.g. --fail-on 'waste>5' --fail-on 'hit-rate<80'";

/** Parses one `--fail-on` value. */
export function parseThreshold(text: string): Threshold {
  const m = /^\s*([a-z-]+)\s*(>=|<=|>|<)\s*\$?\s*(\d+(?:\.\d+)?)\s*%?\s*$/.exec(text);
  const metric = m?.[1] as Metric | undefined;
  if (!m || !metric || !(metric in METRICS)) {
    throw new InputError(
      `--fail-on ${text}: not a threshold; write METRIC OP NUMBER with METRIC one of ${Object.keys(METRICS).join(', ')}, e.g. 'waste>5' (dollars) or 'hit-rate<80' (percent)`,
    );
  }
  const value = Number(m[3]);
  if (METRICS[metric].unit === 'percent' && value > 100)
    throw new InputError(`--fail-on ${text}: a hit rate is a percentage from 0 to 100`);
  return { text: text.trim(), metric, op: m[2] as Op, value };
}

/** The figures a threshold is checked against, for the whole run or one session. */
interface Figures {
  label: string;
  waste: number;
  spend: number;
  /** Percent; null when no response reported cache fields. */
  hitRate: number | null;
  misses: number;
  requests: number;
  unpriced: number;
}

export interface ThresholdVerdict {
  threshold: Threshold;
  /** One entry per figure set that crossed it (the run, or each session that did). */
  crossed: Array<{ label: string; actual: string }>;
  checked: number;
  /** Why a threshold could not be checked at all (then the run fails with exit 2). */
  unchecked?: string;
  notes: string[];
}

function figures(a: AnalysisResult, perSession: boolean): Figures[] {
  const missesBySession = new Map<string, number>();
  for (const m of a.misses)
    if (m.cause !== 'cold_start') missesBySession.set(m.session, (missesBySession.get(m.session) ?? 0) + 1);
  if (!perSession) {
    const t = a.totals;
    return [
      {
        label: 'the run',
        waste: t.waste,
        spend: t.cost,
        hitRate: t.hitRate === null ? null : t.hitRate * 100,
        misses: [...missesBySession.values()].reduce((x, y) => x + y, 0),
        requests: t.requests,
        unpriced: t.unpricedRequests,
      },
    ];
  }
  return a.sessions.map((s) => ({
    label: `session ${s.session}`,
    waste: s.waste,
    spend: s.cost,
    hitRate: s.inputTokens ? (s.readTokens / s.inputTokens) * 100 : null,
    misses: missesBySession.get(s.session) ?? 0,
    requests: s.requests,
    unpriced: s.unpriced,
  }));
}

const holds = (actual: number, op: Op, limit: number) =>
  op === '>' ? actual > limit : op === '>=' ? actual >= limit : op === '<' ? actual < limit : actual <= limit;

function show(metric: Metric, v: number): string {
  const unit = METRICS[metric].unit;
  return unit === 'usd' ? formatUsd(v) : unit === 'percent' ? `${v.toFixed(1)}%` : String(v);
}

/** Checks every threshold against the run (or each session). */
export function checkThresholds(
  a: AnalysisResult,
  thresholds: readonly Threshold[],
  perSession: boolean,
): ThresholdVerdict[] {
  const sets = figures(a, perSession);
  return thresholds.map((threshold) => {
    const verdict: ThresholdVerdict = { threshold, crossed: [], checked: 0, notes: [] };
    const unit = METRICS[threshold.metric].unit;
    let skipped = 0;
    for (const f of sets) {
      let actual: number | null;
      if (threshold.metric === 'hit-rate') actual = f.hitRate;
      else if (threshold.metric === 'misses') actual = f.misses;
      else actual = f.requests > 0 && f.unpriced === f.requests ? null : f[threshold.metric];
      if (actual === null) {
        skipped++;
        continue;
      }
      verdict.checked++;
      if (unit === 'usd' && f.unpriced > 0)
        verdict.notes.push(
          `${f.label}: ${f.unpriced} of ${f.requests} requests are not priced and not counted (add --prices FILE)`,
        );
      if (holds(actual, threshold.op, threshold.value))
        verdict.crossed.push({ label: f.label, actual: show(threshold.metric, actual) });
    }
    if (!verdict.checked) {
      verdict.unchecked =
        threshold.metric === 'hit-rate'
          ? 'no response reported cache fields, so there is no hit rate to check'
          : 'no request is priced (unknown models); add their prices with --prices FILE';
    } else if (skipped) {
      verdict.notes.push(
        `${skipped} session${skipped === 1 ? '' : 's'} could not be checked (${threshold.metric === 'hit-rate' ? 'no cache fields reported' : 'not priced'})`,
      );
    }
    return verdict;
  });
}

/** One line per threshold: crossed (with where and by how much), holds, or cannot be checked. */
export function describeVerdict(v: ThresholdVerdict, perSession: boolean): string {
  const t = v.threshold;
  const limit = show(t.metric, t.value);
  const head = `fail-on ${t.metric}${t.op}${limit}${perSession ? ' (per session)' : ''}`;
  if (v.unchecked) return `${head}: cannot be checked: ${v.unchecked}`;
  if (!v.crossed.length) return `${head}: holds${perSession ? ` in all ${v.checked} sessions checked` : ''}`;
  const list = v.crossed
    .slice(0, 5)
    .map((c) => `${c.label} ${c.actual}`)
    .join(', ');
  return `${head}: crossed by ${list}${v.crossed.length > 5 ? ` and ${v.crossed.length - 5} more` : ''}`;
}

/**
 * Prints one line per threshold and returns the exit code: 1 when one is crossed, 2 when one cannot be
 * checked at all. With `json`, stdout stays one JSON document and the lines go to stderr.
 */
export function reportThresholds(
  result: AnalysisResult,
  thresholds: readonly Threshold[],
  perSession: boolean,
  io: CliIO,
  json: boolean,
): number {
  if (!thresholds.length) return EXIT_OK;
  const s = styles(io.color);
  const say = json ? io.err : io.out;
  if (!json) say('');
  let code = EXIT_OK;
  for (const v of checkThresholds(result, thresholds, perSession)) {
    const line = describeVerdict(v, perSession);
    if (v.unchecked) code = EXIT_USAGE;
    else if (v.crossed.length && code === EXIT_OK) code = EXIT_FINDING;
    say(v.unchecked || v.crossed.length ? s.yellow(line) : s.green(line));
    for (const note of v.notes) say(s.dim(`  ${note}`));
  }
  return code;
}
