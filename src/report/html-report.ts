// Renders an analysis as one self-contained HTML file (inline CSS and SVG, no scripts, no network).
// It lays out what the analyzer found; it never classifies or prices anything, and never loads an asset.

import type { AnalysisResult, AnalyzedRequest, BustCause } from '../analyze/analyze-captures.js';
import { formatUsd } from '../analyze/describe-miss.js';
import { clockTimeMs, missLine } from './miss-line.js';
import { REPORT_CSS } from './report-style.js';
import { fixesLeftAsSentLine, nearestPrices, notCapturedLine, unansweredLine } from './terminal-report.js';

const esc = (s: string) =>
  s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
const n = new Intl.NumberFormat('en-US');

export const CAUSE_COLORS: Record<BustCause, string> = {
  cold_start: '#8a8f98',
  tools_changed: '#d9480f',
  system_changed: '#c2255c',
  messages_edited: '#9c36b5',
  params_changed: '#5f3dc4',
  model_changed: '#1864ab',
  fork_diverged: '#e67700',
  ttl_expired: '#2b8a3e',
  below_minimum: '#5c940d',
  lookback_exceeded: '#0b7285',
  concurrent: '#862e9c',
  thinking_stripped: '#a61e4d',
  unexplained: '#495057',
};

/** Width of a text in the page's 11-12 px sans-serif, generously: labels are laid out, not measured. */
const textWidth = (s: string, px = 11) => Math.ceil(s.length * px * 0.62);
const SIN = Math.sin((55 * Math.PI) / 180);
const COS = Math.cos((55 * Math.PI) / 180);

/** An SVG that shrinks to its container down to `minWidth`, then scrolls: readable at 760 px and wide. */
const svgOpen = (label: string, W: number, H: number, minWidth: number) =>
  `<svg role="img" aria-label="${esc(label)}" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" style="max-width:100%;height:auto;min-width:${Math.min(W, minWidth)}px">`;

/** Requests in groups, one per session (in order of first request), each in time order. */
function bySession(rows: readonly AnalyzedRequest[]): Array<[string, AnalyzedRequest[]]> {
  const groups = new Map<string, AnalyzedRequest[]>();
  for (const r of rows) {
    const g = groups.get(r.session);
    if (g) g.push(r);
    else groups.set(r.session, [r]);
  }
  return [...groups.entries()];
}

function requestTitle(r: AnalyzedRequest): string {
  const u = r.usage;
  const parts = [`${r.session}, turn ${r.turn}, ${clockTimeMs(r.time)} UTC${r.model ? `, ${r.model}` : ''}`];
  if (u)
    parts.push(
      `read ${n.format(u.cacheRead)}, written ${n.format(u.cacheWrite)}, uncached ${n.format(u.uncached)} input tokens`,
    );
  if (r.cost) parts.push(`cost ${formatUsd(r.cost.total)}`);
  if (r.miss)
    parts.push(
      r.miss.cause === 'cold_start'
        ? 'cold start (first write)'
        : `${r.miss.cause}: ${n.format(r.miss.rewrittenTokens)} tokens re-written, ${formatUsd(r.miss.waste)} wasted`,
    );
  if (r.fork) parts.push('a fork');
  return parts.join('\n');
}

function tokensChart(a: AnalysisResult): string {
  const rows = a.requests.filter((r) => r.usage?.cacheReported);
  if (!rows.length) return '<p>No request reported cache fields.</p>';
  const groups = bySession(rows);
  const marked = rows.filter((r) => r.miss && r.miss.cause !== 'cold_start');
  const longestCause = Math.max(0, ...marked.map((r) => textWidth(r.miss?.cause ?? '')));
  const bw = Math.max(4, Math.min(22, 1400 / rows.length - 2));
  const gap = 14;
  const left = 70;
  const legendH = 28;
  // Room above the bars for the rotated cause names, and to the right for the last one's tail.
  const top = legendH + 24 + Math.ceil(longestCause * SIN);
  const plotH = 200;
  const sessionLabel = (g: AnalyzedRequest[], name: string) => g.length * (bw + 2) >= textWidth(name) + 4;
  const rotatedSessions = groups.filter(([name, g]) => !sessionLabel(g, name));
  const longestSession = Math.max(0, ...rotatedSessions.map(([name]) => textWidth(name)));
  const bottom = 26 + Math.ceil(longestSession * Math.sin((40 * Math.PI) / 180)) + 12;
  const plotW = rows.length * (bw + 2) + (groups.length - 1) * gap;
  const W = Math.max(left + plotW + Math.ceil(longestCause * COS) + 24, left + 470);
  const H = top + plotH + bottom;
  const max = Math.max(...rows.map((r) => r.usage?.inputTotal ?? 0), 1);
  const y = (v: number) => top + plotH * (1 - v / max);
  const parts: string[] = [];
  let x = left;
  for (const [name, g] of groups) {
    const start = x;
    for (const r of g) {
      const u = r.usage;
      if (!u) continue;
      const bar: string[] = [];
      let base = 0;
      for (const [v, color] of [
        [u.cacheRead, '#4c9be8'],
        [u.cacheWrite, '#f08c00'],
        [u.uncached, '#adb5bd'],
      ] as const) {
        if (v > 0)
          bar.push(
            `<rect x="${x.toFixed(1)}" y="${y(base + v).toFixed(1)}" width="${bw.toFixed(1)}" height="${(y(base) - y(base + v)).toFixed(1)}" fill="${color}"/>`,
          );
        base += v;
      }
      if (r.miss && r.miss.cause !== 'cold_start') {
        const c = CAUSE_COLORS[r.miss.cause];
        const cx = x + bw / 2;
        bar.push(`<circle cx="${cx.toFixed(1)}" cy="${(y(base) - 8).toFixed(1)}" r="5" fill="${c}"/>`);
        const lx = (cx + 3).toFixed(1);
        const ly = (y(base) - 16).toFixed(1);
        bar.push(
          `<text x="${lx}" y="${ly}" font-size="11" fill="${c}" transform="rotate(-55 ${lx} ${ly})">${esc(r.miss.cause)}</text>`,
        );
      }
      // The hit area spans the whole column, so the tooltip shows wherever the pointer is over it.
      parts.push(
        `<g class="bar"><title>${esc(requestTitle(r))}</title><rect x="${x.toFixed(1)}" y="${top}" width="${bw.toFixed(1)}" height="${plotH}" fill="transparent"/>${bar.join('')}</g>`,
      );
      x += bw + 2;
    }
    const end = x - 2;
    const ly = top + plotH + 16;
    parts.push(
      `<line x1="${start.toFixed(1)}" x2="${end.toFixed(1)}" y1="${top + plotH + 4}" y2="${top + plotH + 4}" stroke="#868e96"/>`,
    );
    parts.push(
      sessionLabel(g, name)
        ? `<text x="${start.toFixed(1)}" y="${ly}" font-size="11"><title>${esc(name)}: ${g.length} requests</title>${esc(name)}</text>`
        : `<text x="${start.toFixed(1)}" y="${ly}" font-size="11" transform="rotate(40 ${start.toFixed(1)} ${ly})"><title>${esc(name)}: ${g.length} requests</title>${esc(name)}</text>`,
    );
    x += gap;
  }
  const axis = [0, 0.5, 1]
    .map(
      (f) =>
        `<text x="${left - 6}" y="${(y(max * f) + 4).toFixed(1)}" font-size="11" text-anchor="end">${n.format(Math.round(max * f))}</text>`,
    )
    .join('');
  const legend = [
    ['#4c9be8', 'read from cache'],
    ['#f08c00', 'written to cache'],
    ['#adb5bd', 'uncached'],
  ]
    .map(
      ([c, l], i) =>
        `<rect x="${left + i * 140}" y="6" width="12" height="12" fill="${c}"/><text x="${left + i * 140 + 18}" y="16" font-size="12">${l}</text>`,
    )
    .join('');
  const dot = `<circle cx="${left + 426}" cy="12" r="5" fill="#495057"/><text x="${left + 436}" y="16" font-size="12">a miss, named by cause</text>`;
  return `${svgOpen('input tokens per request, grouped by session', W, H, 640)}${legend}${dot}${axis}${parts.join('')}</svg><p><small>${rows.length} requests in ${groups.length} session${groups.length === 1 ? '' : 's'}, each session in time order; hover a bar for its tokens, cost and cause.</small></p>`;
}

function wasteChart(a: AnalysisResult): string {
  const causes = a.byCause.filter((c) => c.cause !== 'cold_start');
  if (!causes.length) return '<p>No re-written prefixes.</p>';
  const max = Math.max(...causes.map((c) => c.waste), 1e-9);
  const label = (c: (typeof causes)[number]) =>
    `${formatUsd(c.waste)} · ${c.misses} miss${c.misses === 1 ? '' : 'es'} · ${n.format(c.rewrittenTokens)} tokens`;
  const nameW = Math.max(...causes.map((c) => textWidth(c.cause, 12))) + 16;
  const barMax = 300;
  const W = nameW + barMax + Math.max(...causes.map((c) => textWidth(label(c), 12))) + 24;
  const rowH = 26;
  const H = causes.length * rowH + 10;
  const bars = causes
    .map((c, i) => {
      const w = Math.max(2, (c.waste / max) * barMax);
      const yy = 5 + i * rowH;
      return `<g class="bar"><title>${esc(c.cause)}: ${esc(label(c))} re-written</title><rect x="0" y="${yy}" width="${W}" height="${rowH - 2}" fill="transparent"/><text x="${nameW - 8}" y="${yy + 16}" font-size="12" text-anchor="end">${esc(c.cause)}</text><rect x="${nameW}" y="${yy + 4}" width="${w.toFixed(1)}" height="16" fill="${CAUSE_COLORS[c.cause]}"/><text x="${(nameW + 6 + w).toFixed(1)}" y="${yy + 16}" font-size="12">${esc(label(c))}</text></g>`;
    })
    .join('');
  return `${svgOpen('waste by cause', W, H, 560)}${bars}</svg>`;
}

const pct = (read: number, input: number) => (input ? `${((read / input) * 100).toFixed(1)}%` : 'n/a');

/** Each session's requests in a collapsible table (no script: details/summary). */
function requestTables(a: AnalysisResult): string {
  const MAX_ROWS = 1000;
  const rows = bySession(a.requests);
  if (!rows.length) return '<p>None.</p>';
  const summary = new Map(a.sessions.map((s) => [s.session, s]));
  return rows
    .map(([name, list]) => {
      const s = summary.get(name);
      const head = s
        ? `${esc(name)}: ${n.format(s.requests)} request${s.requests === 1 ? '' : 's'}, hit rate ${pct(s.readTokens, s.inputTokens)}, spend ${formatUsd(s.cost)}, waste ${formatUsd(s.waste)}`
        : esc(name);
      const body = list
        .slice(0, MAX_ROWS)
        .map((r) => {
          const u = r.usage;
          const cause = r.miss
            ? `<span class="dot" style="background:${CAUSE_COLORS[r.miss.cause]}"></span>${esc(r.miss.cause)}`
            : r.fork
              ? 'fork, read its parent'
              : '';
          return `<tr><td>${r.turn}</td><td>${clockTimeMs(r.time)}</td><td>${esc(r.model ?? '?')}</td><td>${u ? n.format(u.cacheRead) : '-'}</td><td>${u ? n.format(u.cacheWrite) : '-'}</td><td>${u ? n.format(u.uncached) : '-'}</td><td>${r.cost ? formatUsd(r.cost.total) : 'unpriced'}</td><td class="l">${cause}</td></tr>`;
        })
        .join('');
      const more =
        list.length > MAX_ROWS
          ? `<p><small>… and ${n.format(list.length - MAX_ROWS)} more requests (--json has them all).</small></p>`
          : '';
      return `<details><summary>${head}</summary><div class="scroll"><table><tr><th>turn</th><th>time (UTC)</th><th>model</th><th>read</th><th>written</th><th>uncached</th><th>cost</th><th class="l">miss</th></tr>${body}</table></div>${more}</details>`;
    })
    .join('');
}

/** Forks named by session and turn, their parents too (the request id stays in a tooltip). */
function forkList(a: AnalysisResult): string {
  const where = new Map(a.requests.map((r) => [r.id, r]));
  const name = (id: string | undefined) => {
    const r = id ? where.get(id) : undefined;
    return r ? `${esc(r.session)} turn ${r.turn}` : esc(id ?? '?');
  };
  return a.requests
    .filter((r) => r.fork)
    .map(
      (r) =>
        `<li title="${esc(r.id)} forked from ${esc(r.fork?.parent ?? '?')}"><b>${name(r.id)}</b> forked from ${name(r.fork?.parent)}${r.miss ? ` — ${esc(r.miss.cause)}` : ' — read its parent’s cache'}</li>`,
    )
    .join('');
}

/** Fixes that changed requests, and what fixes said of those they left as sent, when either happened. */
function applied(a: AnalysisResult): string {
  const left = fixesLeftAsSentLine(a);
  const leftAsSent = left ? `<p>${esc(left.charAt(0).toUpperCase() + left.slice(1))}.</p>` : '';
  if (!a.fixesApplied) return leftAsSent;
  const list = Object.entries(a.fixesApplied)
    .map(([fix, n]) => `${esc(fix)} ${n}×`)
    .join(' · ');
  return `<p>Fixes applied: ${list} (requests that went out in the fixed form).</p>${leftAsSent}`;
}

/** Fixes the provider refused, when any was (each such request went out as the client sent it). */
function refusals(a: AnalysisResult): string {
  if (!a.fixRefusals) return '';
  const list = Object.entries(a.fixRefusals)
    .map(([fix, n]) => `${esc(fix)} ${n}×`)
    .join(' · ');
  return `<p class="warn">Fix refused by the provider: ${list}. Each of those requests went out as the client sent it, and the fix is off for that conversation and model.</p>`;
}

export function renderHtmlReport(a: AnalysisResult): string {
  const t = a.totals;
  const sessions = a.sessions
    .map(
      (s) =>
        `<tr><td>${esc(s.session)}</td><td>${s.requests}</td><td>${s.forks}</td><td>${pct(s.readTokens, s.inputTokens)}</td><td>${formatUsd(s.cost)}</td><td>${formatUsd(s.waste)}</td></tr>`,
    )
    .join('');
  const forks = forkList(a);
  const misses = a.misses
    .filter((m) => m.cause !== 'cold_start')
    .map(
      (m) =>
        `<li><span class="dot" style="background:${CAUSE_COLORS[m.cause]}"></span>${esc(missLine(m))}</li>`,
    )
    .join('');
  const unpriced = t.unpricedModels.length
    ? `<p class="warn">Not priced (no dated price; add one with <code>--prices FILE</code>): ${esc(t.unpricedModels.join(', '))}.</p>`
    : '';
  const lost = notCapturedLine(a);
  const cut = unansweredLine(a);
  const notCaptured =
    (lost ? `<p class="warn">${esc(lost)}.</p>` : '') + (cut ? `<p class="warn">${esc(cut)}.</p>` : '');
  const borrowed = nearestPrices(a);
  const nearest = borrowed
    ? `<p class="warn">${esc(borrowed.replace(/^./, (c) => c.toUpperCase()))}.</p>`
    : '';
  const prices = a.prices
    .map(
      (p) =>
        `${p.pricedAs ? `${esc(p.model)} (no price row of its own) priced as ${esc(p.pricedAs)}, ` : ''}${esc(p.label)}: ${esc(p.date)}, ${esc(p.source)}`,
    )
    .join('<br>');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>cacheward report</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
${REPORT_CSS}</style></head><body>
<h1>cacheward report</h1>
<small>${n.format(a.generatedFrom.records)} records from ${a.generatedFrom.files} file(s)${a.generatedFrom.skippedLines ? `, ${a.generatedFrom.skippedLines} torn lines skipped` : ''}</small>
${notCaptured}
<div class="kpi"><div>sessions<b>${n.format(t.sessions)}</b></div><div>requests<b>${n.format(t.requests)}</b></div><div>hit rate (token-weighted)<b>${t.hitRate === null ? 'n/a' : `${(t.hitRate * 100).toFixed(1)}%`}</b></div><div>spend<b>${formatUsd(t.cost)}</b></div><div>waste<b>${formatUsd(t.waste)}</b></div></div>
${unpriced}${nearest}${applied(a)}${refusals(a)}
<h2>Input tokens per request</h2><div class="chart">${tokensChart(a)}</div>
<h2>Waste by cause</h2><div class="chart">${wasteChart(a)}</div>
<h2>Sessions</h2><div class="scroll"><table><tr><th>session</th><th>requests</th><th>forks</th><th>hit rate</th><th>spend</th><th>waste</th></tr>${sessions}</table></div>
<h2>Requests by session</h2>${requestTables(a)}
<h2>Forks</h2>${forks ? `<ul>${forks}</ul>` : '<p>None.</p>'}
<h2>Misses, costliest first</h2>${misses ? `<ul>${misses}</ul>` : '<p>No re-written prefixes.</p>'}
<h2>Prices used</h2><p><small>${prices || 'none'}</small></p>
</body></html>
`;
}
