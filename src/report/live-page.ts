// The proxy's live page at /_cacheward/: the report's look, updated by server-sent events from the same
// live analysis the log and the metrics use. One inline script (nonce'd), no external asset, same origin.

import { CAUSE_COLORS } from './html-report.js';
import { REPORT_CSS } from './report-style.js';

/** The page; `nonce` goes on its one script and in the Content-Security-Policy the proxy sends with it. */
export function renderLivePage(nonce: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>cacheward live</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><link rel="icon" href="data:,">
<style>${REPORT_CSS}
#state{margin-left:8px}.miss td{background:#fff5f5}.cause{white-space:nowrap}td.notes{text-align:left;white-space:normal;max-width:420px;color:#495057}
</style></head><body>
<h1>cacheward live <small id="state">connecting…</small></h1>
<div class="kpi"><div>requests<b id="k-req">0</b></div><div>hit rate (token-weighted)<b id="k-hit">n/a</b></div><div>spend<b id="k-cost">$0.00</b></div><div>waste<b id="k-waste">$0.00</b></div></div>
<h2>Hit rate and waste over time (per minute)</h2><div class="chart" id="chart"><p>No requests yet.</p></div>
<h2>Requests, latest first</h2><div class="scroll"><table id="requests"><thead><tr><th>time</th><th>session</th><th>model</th><th>hit</th><th>cause</th><th>read</th><th>written</th><th>cost</th><th class="l">what happened</th></tr></thead><tbody></tbody></table></div>
<h2>Sessions</h2><div class="scroll"><table id="sessions"><thead><tr><th>session</th><th>requests</th><th>hit rate</th><th>spend</th><th>waste</th></tr></thead><tbody></tbody></table></div>
<script nonce="${nonce}">
(() => {
  const COLORS = ${JSON.stringify(CAUSE_COLORS)};
  const n = new Intl.NumberFormat('en-US');
  const usd = (v) => v === null || v === undefined ? 'unpriced' : (v !== 0 && Math.abs(v) < 0.01 ? '$' + v.toFixed(4) : '$' + v.toFixed(2));
  const pct = (r, i) => i ? (r / i * 100).toFixed(1) + '%' : 'n/a';
  const el = (tag, text, cls) => { const e = document.createElement(tag); if (text !== undefined) e.textContent = text; if (cls) e.className = cls; return e; };
  const time = (ms) => new Date(ms).toISOString().slice(11, 23);
  let state = { requests: [], sessions: [], minutes: [], totals: { requests: 0, inputTokens: 0, readTokens: 0, cost: 0, waste: 0 } };
  function row(r) {
    const tr = el('tr'); tr.dataset.id = r.id; tr.dataset.cause = r.cause || '';
    if (r.cause && r.cause !== 'cold_start') tr.className = 'miss';
    tr.append(el('td', time(r.time)), el('td', r.session), el('td', r.model || '?'), el('td', r.hitRate === null ? 'n/a' : (r.hitRate * 100).toFixed(1) + '%'));
    const c = el('td', undefined, 'cause');
    if (r.cause) { const d = el('span', undefined, 'dot'); d.style.background = COLORS[r.cause] || '#999'; c.append(d, document.createTextNode(r.cause)); } else c.textContent = '—';
    const notes = [r.sentence, ...r.fixes.filter((f) => f.notes.length).map((f) => f.fix + ': ' + f.notes.join('; '))].filter(Boolean).join(' · ');
    tr.append(c, el('td', n.format(r.readTokens)), el('td', n.format(r.writtenTokens)), el('td', usd(r.cost) + (r.pricedAs ? ' (as ' + r.pricedAs + ')' : '')), el('td', notes, 'notes'));
    return tr;
  }
  function renderTotals() {
    const t = state.totals;
    document.getElementById('k-req').textContent = n.format(t.requests);
    document.getElementById('k-hit').textContent = pct(t.readTokens, t.inputTokens);
    document.getElementById('k-cost').textContent = usd(t.cost);
    document.getElementById('k-waste').textContent = usd(t.waste);
  }
  function renderSessions() {
    const body = document.querySelector('#sessions tbody'); body.replaceChildren();
    for (const s of state.sessions) { const tr = el('tr'); tr.append(el('td', s.session), el('td', n.format(s.requests)), el('td', pct(s.readTokens, s.inputTokens)), el('td', usd(s.cost)), el('td', usd(s.waste))); body.append(tr); }
  }
  function renderChart() {
    const m = state.minutes; const box = document.getElementById('chart');
    if (!m.length) return;
    const W = Math.max(360, m.length * 28 + 80), H = 180, ns = 'http://www.w3.org/2000/svg';
    const svg = document.createElementNS(ns, 'svg'); svg.setAttribute('viewBox', '0 0 ' + W + ' ' + H); svg.setAttribute('width', W); svg.setAttribute('height', H);
    svg.setAttribute('role', 'img'); svg.setAttribute('aria-label', 'hit rate (line) and waste (bars) per minute');
    const maxWaste = Math.max(0.0001, ...m.map((x) => x.waste));
    const x = (i) => 60 + i * 28, y = (v) => 150 - v * 130;
    m.forEach((b, i) => {
      const h = b.waste / maxWaste * 130; const r = document.createElementNS(ns, 'rect');
      r.setAttribute('x', x(i) - 8); r.setAttribute('y', 150 - h); r.setAttribute('width', 16); r.setAttribute('height', h); r.setAttribute('fill', '#ffc9c9');
      const tip = document.createElementNS(ns, 'title'); tip.textContent = time(b.minute).slice(0, 5) + ': ' + b.requests + ' requests, hit ' + pct(b.readTokens, b.inputTokens) + ', waste ' + usd(b.waste); r.append(tip); svg.append(r);
    });
    const line = document.createElementNS(ns, 'polyline');
    line.setAttribute('points', m.map((b, i) => x(i) + ',' + y(b.inputTokens ? b.readTokens / b.inputTokens : 0)).join(' '));
    line.setAttribute('fill', 'none'); line.setAttribute('stroke', '#1864ab'); line.setAttribute('stroke-width', '2'); svg.append(line);
    for (const [v, label] of [[0, '0%'], [0.5, '50%'], [1, '100%']]) { const t = document.createElementNS(ns, 'text'); t.setAttribute('x', 8); t.setAttribute('y', y(v) + 4); t.setAttribute('font-size', '11'); t.textContent = 'hit ' + label; svg.append(t); }
    const w = document.createElementNS(ns, 'text'); w.setAttribute('x', 8); w.setAttribute('y', 172); w.setAttribute('font-size', '11'); w.textContent = 'bars: waste per minute (max ' + usd(maxWaste) + ')'; svg.append(w);
    box.replaceChildren(svg);
  }
  function renderAll() {
    const body = document.querySelector('#requests tbody'); body.replaceChildren(...state.requests.slice().reverse().slice(0, 200).map(row));
    renderTotals(); renderSessions(); renderChart();
  }
  const source = new EventSource('events');
  source.addEventListener('snapshot', (e) => { state = JSON.parse(e.data); renderAll(); document.getElementById('state').textContent = 'live'; });
  source.addEventListener('request', (e) => {
    const r = JSON.parse(e.data); state.requests.push(r); if (state.requests.length > 500) state.requests.shift();
    const body = document.querySelector('#requests tbody'); body.prepend(row(r)); while (body.children.length > 200) body.lastChild.remove();
    const t = state.totals; t.requests++; t.inputTokens += r.hitRate === null ? 0 : r.inputTokens; t.readTokens += r.readTokens; t.cost += r.cost || 0; t.waste += r.waste || 0;
    let s = state.sessions.find((x) => x.session === r.session);
    if (!s) { s = { session: r.session, requests: 0, inputTokens: 0, readTokens: 0, cost: 0, waste: 0, last: r.time }; state.sessions.unshift(s); if (state.sessions.length > 200) state.sessions.pop(); }
    s.requests++; s.inputTokens += r.hitRate === null ? 0 : r.inputTokens; s.readTokens += r.readTokens; s.cost += r.cost || 0; s.waste += r.waste || 0; s.last = r.time;
    const minute = Math.floor(r.time / 60000) * 60000; let m = state.minutes.find((x) => x.minute === minute);
    if (!m) { m = { minute, inputTokens: 0, readTokens: 0, waste: 0, requests: 0 }; state.minutes.push(m); if (state.minutes.length > 180) state.minutes.shift(); }
    m.requests++; m.inputTokens += r.hitRate === null ? 0 : r.inputTokens; m.readTokens += r.readTokens; m.waste += r.waste || 0;
    renderTotals(); renderSessions(); renderChart();
  });
  source.onerror = () => { document.getElementById('state').textContent = 'reconnecting…'; };
})();
</script>
</body></html>
`;
}
