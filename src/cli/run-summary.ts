// What `cacheward run` prints at the end: requests, hit rate, spend, waste, top causes, the report command.
// It formats the analyzer's result (its sentences too); it never computes a cause or a price itself.

import type { AnalysisResult } from '../analyze/analyze-captures.js';
import { formatUsd } from '../analyze/describe-miss.js';
import { missLine } from '../report/miss-line.js';
import { nearestPrices, notCapturedLine, type TerminalStyles } from '../report/terminal-report.js';
import { shellQuote } from './shell-quote.js';

const n = new Intl.NumberFormat('en-US');

/**
 * The lines of the summary; `reportCommand` is the exact command that reports on this run's captures.
 * `unmarked`: exchanges not captured that the files hold no marker of (the report on them cannot say them).
 */
export function runSummary(
  a: AnalysisResult,
  reportCommand: string[],
  s: TerminalStyles,
  topCauses = 3,
  transport?: string,
  unmarked = 0,
): string[] {
  const t = a.totals;
  const out: string[] = [];
  const hit =
    t.hitRate === null ? 'n/a (no response reported cache fields)' : `${(t.hitRate * 100).toFixed(1)}%`;
  const share = t.cost > 0 ? ` (${((t.waste / t.cost) * 100).toFixed(1)}% of spend)` : '';
  // Exchanges lost to a full disk: the figures cover only what was captured, and say so first.
  const partial = (a.generatedFrom.notCaptured ?? 0) > 0 ? ' captured (only these: see below)' : '';
  out.push(
    s.bold(
      `cacheward run: ${n.format(t.requests)} request${t.requests === 1 ? '' : 's'} in ${n.format(t.sessions)} session${t.sessions === 1 ? '' : 's'}${partial}`,
    ),
  );
  if (transport) out.push(transport);
  out.push(
    `  hit rate ${hit} token-weighted   spend ${formatUsd(t.cost)}   waste ${s.yellow(formatUsd(t.waste))}${share}`,
  );
  if (t.unpricedModels.length)
    out.push(
      s.yellow(
        `  not priced: ${t.unpricedModels.join(', ')} (${t.unpricedRequests} request${t.unpricedRequests === 1 ? '' : 's'}; add --prices FILE)`,
      ),
    );
  const borrowed = nearestPrices(a);
  if (borrowed) out.push(s.yellow(`  ${borrowed}`));
  const lost = notCapturedLine(a);
  if (lost) out.push(s.yellow(`  ${lost}`));
  const causes = a.byCause.filter((c) => c.cause !== 'cold_start').slice(0, topCauses);
  if (!causes.length) out.push(s.green('  no cache misses beyond the first write of each conversation'));
  else {
    out.push('  top causes:');
    for (const c of causes) {
      const worst = a.misses.find((m) => m.cause === c.cause);
      out.push(
        `    ${s.bold(c.cause)} ×${c.misses}, ${formatUsd(c.waste)}${worst ? `: ${missLine(worst)}` : ''}`,
      );
    }
  }
  out.push(
    `  full report: ${reportCommand.map(shellQuote).join(' ')}${unmarked ? ` (it cannot count the ${n.format(unmarked)} not captured that the disk had no room to mark)` : ''}`,
  );
  return out;
}
