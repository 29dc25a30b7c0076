// Renders an analysis as one self-contained HTML file (inline CSS and SVG, no scripts, no network): tokens
// per request over time with misses marked by cause, waste by cause, sessions and forks, the miss list.

import type { AnalysisResult, BustCause } from '../analyze/analyze-captures.js';
import { clockTime, formatUsd } from '../analyze/describe-miss.js';

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
  unexplained: '#495057',
};

function tokensChart(a: AnalysisResult): string {
  const rows = a.requests.filter((r) => r.usage?.cacheReported);
  if (!rows.length) return '<p>No request reported cache fields.</p>';
  const W = Math.max(640, Math.min(2400, rows.length * 14 + 80)) + 90;
  const H = 340;
  const top = 110;
  const bottom = 40;
  const left = 70;
  const max = Math.max(...rows.map((r) => r.usage?.inputTotal ?? 0), 1);
  const bw = Math.max(3, (W - left - 10) / rows.length - 2);
  const y = (v: number) => top + (H - top - bottom) * (1 - v / max);
  const parts: string[] = [];
  for (const [i, r] of rows.entries()) {
    const u = r.usage;
    if (!u) continue;
    const x = left + i * (bw + 2);
    let base = 0;
    for (const [v, color] of [
      [u.cacheRead, '#4c9be8'],
      [u.cacheWrite, '#f08c00'],
      [u.uncached, '#adb5bd'],
    ] as const) {
      if (v > 0)
        parts.push(
          `<rect x="${x.toFixed(1)}" y="${y(base + v).toFixed(1)}" width="${bw.toFixed(1)}" height="${(y(base) - y(base + v)).toFixed(1)}" fill="${color}"/>`,
        );
      base += v;
    }
    if (r.miss && r.miss.cause !== 'cold_start') {
      const c = CAUSE_COLORS[r.miss.cause];
      parts.push(
        `<circle cx="${(x + bw / 2).toFixed(1)}" cy="${(y(base) - 8).toFixed(1)}" r="5" fill="${c}"/>`,
      );
      const lx = (x + bw / 2 + 3).toFixed(1);
      const ly = (y(base) - 16).toFixed(1);
      parts.push(
        `<text x="${lx}" y="${ly}" font-size="11" fill="${c}" transform="rotate(-55 ${lx} ${ly})">${esc(r.miss.cause)}</text>`,
      );
    }
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
        `<rect x="${left + i * 150}" y="6" width="12" height="12" fill="${c}"/><text x="${left + i * 150 + 18}" y="16" font-size="12">${l}</text>`,
    )
    .join('');
  const firstT = clockTime(rows[0]?.time ?? 0);
  const lastT = clockTime(rows[rows.length - 1]?.time ?? 0);
  return `<svg role="img" aria-label="input tokens per request" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}">${legend}${axis}${parts.join('')}<text x="${left}" y="${H - 12}" font-size="11">${firstT} UTC</text><text x="${W - 10}" y="${H - 12}" font-size="11" text-anchor="end">${lastT} UTC · ${rows.length} requests</text></svg>`;
}

function wasteChart(a: AnalysisResult): string {
  const causes = a.byCause.filter((c) => c.cause !== 'cold_start');
  if (!causes.length) return '<p>No re-written prefixes.</p>';
  const max = Math.max(...causes.map((c) => c.waste), 1e-9);
  const W = 720;
  const rowH = 26;
  const H = causes.length * rowH + 10;
  const bars = causes
    .map((c, i) => {
      const w = Math.max(2, (c.waste / max) * 380);
      const yy = 5 + i * rowH;
      return `<text x="170" y="${yy + 16}" font-size="12" text-anchor="end">${esc(c.cause)}</text><rect x="180" y="${yy + 4}" width="${w.toFixed(1)}" height="16" fill="${CAUSE_COLORS[c.cause]}"/><text x="${(186 + w).toFixed(1)}" y="${yy + 16}" font-size="12">${formatUsd(c.waste)} · ${c.misses} miss${c.misses === 1 ? '' : 'es'} · ${n.format(c.rewrittenTokens)} tokens</text>`;
    })
    .join('');
  return `<svg role="img" aria-label="waste by cause" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}">${bars}</svg>`;
}

export function renderHtmlReport(a: AnalysisResult): string {
  const t = a.totals;
  const sessions = a.sessions
    .map(
      (s) =>
        `<tr><td>${esc(s.session)}</td><td>${s.requests}</td><td>${s.forks}</td><td>${s.inputTokens ? ((s.readTokens / s.inputTokens) * 100).toFixed(1) : 'n/a'}%</td><td>${formatUsd(s.cost)}</td><td>${formatUsd(s.waste)}</td></tr>`,
    )
    .join('');
  const forks = a.requests
    .filter((r) => r.fork)
    .map(
      (r) =>
        `<li>${esc(r.id)} (turn ${r.turn} of ${esc(r.session)}) forked from ${esc(r.fork?.parent ?? '?')}${r.miss ? ` — ${esc(r.miss.cause)}` : ' — read its parent’s cache'}</li>`,
    )
    .join('');
  const misses = a.misses
    .filter((m) => m.cause !== 'cold_start')
    .map(
      (m) =>
        `<li><span class="dot" style="background:${CAUSE_COLORS[m.cause]}"></span>${esc(m.sentence)}</li>`,
    )
    .join('');
  const unpriced = t.unpricedModels.length
    ? `<p class="warn">Not priced (no dated price; add one with <code>--prices FILE</code>): ${esc(t.unpricedModels.join(', '))}.</p>`
    : '';
  const prices = a.prices.map((p) => `${esc(p.label)}: ${esc(p.date)}, ${esc(p.source)}`).join('<br>');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>cacheward report</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#212529;max-width:1400px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:16px;margin:28px 0 8px}
.kpi{display:flex;gap:28px;flex-wrap:wrap;margin:12px 0}.kpi div{background:#f1f3f5;padding:10px 14px;border-radius:6px}
.kpi b{display:block;font-size:20px}table{border-collapse:collapse}td,th{padding:4px 10px;border-bottom:1px solid #dee2e6;text-align:right}
td:first-child,th:first-child{text-align:left}.warn{color:#b35c00}.dot{display:inline-block;width:10px;height:10px;border-radius:5px;margin-right:6px}
ul{padding-left:18px}li{margin:3px 0}.chart{overflow-x:auto}small{color:#6c757d}
</style></head><body>
<h1>cacheward report</h1>
<small>${n.format(a.generatedFrom.records)} records from ${a.generatedFrom.files} file(s)${a.generatedFrom.skippedLines ? `, ${a.generatedFrom.skippedLines} torn lines skipped` : ''}</small>
<div class="kpi"><div>sessions<b>${n.format(t.sessions)}</b></div><div>requests<b>${n.format(t.requests)}</b></div><div>hit rate (token-weighted)<b>${t.hitRate === null ? 'n/a' : `${(t.hitRate * 100).toFixed(1)}%`}</b></div><div>spend<b>${formatUsd(t.cost)}</b></div><div>waste<b>${formatUsd(t.waste)}</b></div></div>
${unpriced}
<h2>Input tokens per request</h2><div class="chart">${tokensChart(a)}</div>
<h2>Waste by cause</h2><div class="chart">${wasteChart(a)}</div>
<h2>Sessions</h2><table><tr><th>session</th><th>requests</th><th>forks</th><th>hit rate</th><th>spend</th><th>waste</th></tr>${sessions}</table>
<h2>Forks</h2>${forks ? `<ul>${forks}</ul>` : '<p>None.</p>'}
<h2>Misses, costliest first</h2>${misses ? `<ul>${misses}</ul>` : '<p>No re-written prefixes.</p>'}
<h2>Prices used</h2><p><small>${prices || 'none'}</small></p>
</body></html>
`;
}
