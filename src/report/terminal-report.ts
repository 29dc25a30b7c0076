// Renders an analysis for a terminal: a summary, sessions, waste by cause, and the costliest misses as
// sentences. Text only; colour comes from the caller's styles and vanishes under NO_COLOR.

import type { AnalysisResult } from '../analyze/analyze-captures.js';
import { clockTime, formatUsd } from '../analyze/describe-miss.js';
import { missLine } from './miss-line.js';

const n = new Intl.NumberFormat('en-US');
const pct = (v: number | null) => (v === null ? 'n/a' : `${(v * 100).toFixed(1)}%`);

export interface TerminalStyles {
  bold(s: string): string;
  dim(s: string): string;
  yellow(s: string): string;
  green(s: string): string;
}

/**
 * The models priced from another row (no row of their own), in one line, or undefined: "priced from the
 * nearest row (no row of their own): claude-opus-5-5 as claude-opus-5 (Claude Opus 5, 2026-08-20)".
 */
export function nearestPrices(a: Pick<AnalysisResult, 'prices'>): string | undefined {
  const list = a.prices.filter((p) => p.pricedAs !== undefined);
  if (!list.length) return undefined;
  return `priced from the nearest row (no row of their own): ${list.map((p) => `${p.model} as ${p.pricedAs} (${p.label}, ${p.date})`).join(', ')}`;
}

function table(rows: string[][]): string[] {
  const widths = rows[0]?.map((_, c) => Math.max(...rows.map((r) => (r[c] ?? '').length))) ?? [];
  return rows.map((r) =>
    r.map((cell, c) => (c === 0 ? cell.padEnd(widths[c] ?? 0) : cell.padStart(widths[c] ?? 0))).join('  '),
  );
}

export function renderTerminalReport(a: AnalysisResult, s: TerminalStyles, maxMisses = 10): string[] {
  const t = a.totals;
  const out: string[] = [];
  const first = Math.min(...a.sessions.map((x) => x.first));
  const last = Math.max(...a.sessions.map((x) => x.last));
  out.push(
    s.bold(
      `cacheward report: ${n.format(t.sessions)} session${t.sessions === 1 ? '' : 's'}, ${n.format(t.requests)} request${t.requests === 1 ? '' : 's'}` +
        (Number.isFinite(first)
          ? `, ${new Date(first).toISOString().slice(0, 16).replace('T', ' ')} to ${clockTime(last).slice(0, 5)} UTC`
          : ''),
    ),
  );
  out.push(
    `  hit rate ${pct(t.hitRate)} (token-weighted: ${n.format(t.readTokens)} of ${n.format(t.inputTokens)} input tokens read from cache)` +
      (t.notReported ? s.dim(`; ${t.notReported} responses did not report cache fields`) : ''),
  );
  const wasteShare = t.cost > 0 ? ` (${((t.waste / t.cost) * 100).toFixed(1)}% of spend)` : '';
  out.push(`  spend ${formatUsd(t.cost)}   waste ${s.yellow(formatUsd(t.waste))}${wasteShare}`);
  if (t.unpricedModels.length) {
    out.push(
      s.yellow(
        `  not priced (no dated price; add one with --prices FILE): ${t.unpricedModels.join(', ')} (${t.unpricedRequests} request${t.unpricedRequests === 1 ? '' : 's'})`,
      ),
    );
  }
  const lost = notCapturedLine(a);
  if (lost) out.push(s.yellow(`  ${lost}`));
  const cut = unansweredLine(a);
  if (cut) out.push(s.yellow(`  ${cut}`));
  const borrowed = nearestPrices(a);
  if (borrowed) out.push(s.yellow(`  ${borrowed}`));
  if (t.unfixed) {
    const u = t.unfixed;
    out.push(
      s.yellow(
        `  went out unfixed because the fleet's shared state could not be had: ${n.format(u.requests)} request${u.requests === 1 ? '' : 's'}, ${n.format(u.rewrittenTokens)} tokens re-written (${formatUsd(u.waste)})`,
      ),
    );
  }
  if (a.byCause.length) {
    out.push(
      `  causes: ${a.byCause
        .map((c) => `${c.cause} ${c.misses}${c.waste > 0 ? ` ${formatUsd(c.waste)}` : ''}`)
        .join(' · ')}`,
    );
  }
  if (a.fixesApplied) {
    out.push(
      `  fixes applied: ${Object.entries(a.fixesApplied)
        .map(([fix, n]) => `${fix} ${n}×`)
        .join(' · ')} (requests that went out in the fixed form)`,
    );
  }
  const leftAsSent = fixesLeftAsSentLine(a);
  if (leftAsSent) out.push(`  ${leftAsSent}`);
  if (a.fixRefusals) {
    out.push(
      s.yellow(
        `  fix refused by the provider: ${Object.entries(a.fixRefusals)
          .map(([fix, n]) => `${fix} ${n}×`)
          .join(
            ' · ',
          )} (each request went out as the client sent it; the fix is off for that conversation and model)`,
      ),
    );
  }
  out.push('');
  const rows = [['session', 'requests', 'forks', 'hit rate', 'spend', 'waste']];
  for (const x of a.sessions.slice(0, 15)) {
    rows.push([
      // A session id whole (a UUID is 36): it is what --json, the live page and the agent call it.
      x.session.length > 40 ? `${x.session.slice(0, 39)}…` : x.session,
      n.format(x.requests),
      n.format(x.forks),
      pct(x.inputTokens ? x.readTokens / x.inputTokens : null),
      // A session none of whose requests is priced has no spend to show, not $0.00.
      x.unpriced === x.requests ? 'unpriced' : formatUsd(x.cost),
      x.unpriced === x.requests ? 'unpriced' : formatUsd(x.waste),
    ]);
  }
  out.push(...table(rows).map((l, i) => (i === 0 ? s.dim(l) : l)));
  if (a.sessions.length > 15)
    out.push(s.dim(`  … and ${a.sessions.length - 15} more sessions (--json has them all)`));
  const misses = a.misses.filter((m) => m.cause !== 'cold_start');
  out.push('');
  // When no session had a second request, nothing was there to read: said as such.
  const laterTurns = a.sessions.some((x) => x.requests > 1);
  if (!misses.length)
    out.push(
      s.green(
        laterTurns
          ? 'no re-written prefixes: every turn read what the one before it cached'
          : 'no re-written prefixes: no session has a second request yet, to read what the first cached',
      ),
    );
  else {
    out.push(s.bold(`costliest misses (${misses.length} in all):`));
    for (const m of misses.slice(0, maxMisses)) out.push(`  ${missLine(m)}`);
  }
  if (a.generatedFrom.skippedLines)
    out.push(
      s.dim(
        `(${a.generatedFrom.skippedLines} torn or invalid line${a.generatedFrom.skippedLines === 1 ? '' : 's'} skipped; see the warnings above)`,
      ),
    );
  return out;
}

/** What fixes said of requests they left as sent, the three most frequent notes, or undefined. */
export function fixesLeftAsSentLine(a: AnalysisResult): string | undefined {
  const notes = a.fixesLeftAsSent;
  if (!notes?.length) return undefined;
  const shown = notes.slice(0, 3).map((n) => `${n.fix} "${n.note}" (said ${n.said}×)`);
  const more = notes.length > 3 ? ` · and ${notes.length - 3} more (--json)` : '';
  return `fixes that left requests as sent: ${shown.join(' · ')}${more}`;
}

/** The sentence for requests that got no whole answer, by how they ended, or undefined when all did. */
export function unansweredLine(a: AnalysisResult): string | undefined {
  const by = a.totals.unanswered;
  if (!by) return undefined;
  const n = Object.values(by).reduce((x, y) => x + y, 0);
  const how = Object.entries(by)
    .sort((x, y) => y[1] - x[1])
    .map(([k, v]) => `${k === 'no_response' ? 'no response recorded' : k} ${v.toLocaleString('en-US')}`)
    .join(' · ');
  return `${n.toLocaleString('en-US')} request${n === 1 ? '' : 's'} got no whole answer (${how}): counted as requests, their tokens only where the provider reported them`;
}

/** The sentence for exchanges the proxy did not capture (its own count), or undefined when there were none. */
export function notCapturedLine(a: AnalysisResult): string | undefined {
  const n = a.generatedFrom.notCaptured ?? 0;
  if (!n) return undefined;
  return `${n.toLocaleString('en-US')} exchange${n === 1 ? ' was' : 's were'} not captured (the proxy's capture queue was full, or the disk refused a write): these figures leave ${n === 1 ? 'it' : 'them'} out`;
}
