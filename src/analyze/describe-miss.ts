// One line a person understands for each miss: when, what broke the prefix, how much was re-written, and
// what it cost ("turn 41, 12:03:55 — tools changed: `X` added at index 17; 184,220 tokens re-written; $2.30 wasted").

import type { Miss } from './analyze-captures.js';
import type { CapturedChange } from './captured-divergence.js';

const n = new Intl.NumberFormat('en-US');

export function formatUsd(v: number | null): string {
  if (v === null) return 'unpriced';
  if (v !== 0 && Math.abs(v) < 0.01) return `$${v.toFixed(4)}`;
  return `$${v.toFixed(2)}`;
}

export function clockTime(ms: number): string {
  return new Date(ms).toISOString().slice(11, 19);
}

const short = (v: unknown) => {
  if (v === undefined) return '(absent)';
  const s = JSON.stringify(v);
  return s.length > 60 ? `${s.slice(0, 57)}...` : s;
};

function changeText(c: CapturedChange): string {
  switch (c.level) {
    case 'model':
      return `model changed from ${c.before ?? '?'} to ${c.after ?? '?'}`;
    case 'params':
      return c.params
        .map((p) => `\`${p.name}\` changed from ${short(p.before)} to ${short(p.after)}`)
        .join(', ');
    case 'tools': {
      const parts = [
        ...c.added.map((t) => `\`${t.name}\` added at index ${t.index}`),
        ...c.removed.map((t) => `\`${t.name}\` removed from index ${t.index}`),
        ...c.reordered.map((t) => `\`${t.moved}\` moved before \`${t.displaced}\``),
        ...c.changed.map((t) => `\`${t}\` definition changed`),
      ];
      return parts.join(', ') || 'the tool list changed';
    }
    case 'system':
      return `system block ${c.block} changed`;
    case 'messages':
      return `message ${c.message} block ${c.block} ${c.edit}`;
  }
}

const TITLES: Record<Miss['cause'], string> = {
  cold_start: 'cold start',
  tools_changed: 'tools changed',
  system_changed: 'system changed',
  messages_edited: 'history edited',
  params_changed: 'parameters changed',
  model_changed: 'model changed',
  fork_diverged: 'fork diverged from its parent',
  ttl_expired: 'cache expired',
  below_minimum: 'below the minimum cacheable size',
  lookback_exceeded: 'beyond the 20-block lookback',
  concurrent: 'sent before the earlier response began',
  unexplained: 'unexplained (the provider did not read a live entry)',
};

export function describeMiss(m: Miss): string {
  const d = m.detail;
  let what = TITLES[m.cause];
  if (d.change) what += `: ${changeText(d.change)}`;
  if (m.cause === 'ttl_expired')
    what += `: idle ${n.format(d.idleSeconds ?? 0)} s against a ${n.format(d.ttlSeconds ?? 0)} s TTL`;
  if (m.cause === 'below_minimum')
    what += `: ${n.format(d.prefixTokens ?? 0)} tokens, the model caches from ${n.format(d.minimumTokens ?? 0)}`;
  if (m.cause === 'lookback_exceeded' && d.lookbackDistance)
    what += `: the last write was ${d.lookbackDistance} blocks back`;
  if (m.cause === 'unexplained')
    what += `: expected to read ${n.format(d.expectedReadTokens ?? 0)}, read ${n.format(d.actualReadTokens ?? 0)}`;
  if (m.cause === 'concurrent') what += `: ${(d.idleSeconds ?? 0).toFixed(1)} s after its parent started`;
  if (d.byteOffset !== undefined) what += ` (byte ${n.format(d.byteOffset)})`;
  const cost =
    m.cause === 'cold_start'
      ? ''
      : `; ${n.format(m.rewrittenTokens)} tokens re-written; ${formatUsd(m.waste)} wasted`;
  const diag = m.providerDiagnosis
    ? `; provider says ${m.providerDiagnosis.reason}${m.providerDiagnosis.agrees ? '' : ' (disagrees)'}`
    : '';
  return `turn ${m.turn}, ${clockTime(m.time)} — ${what}${cost}${diag}`;
}
