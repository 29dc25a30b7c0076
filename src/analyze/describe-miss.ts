// One line a person understands for each miss: when, what broke the prefix, how much was re-written, and
// what it cost ("turn 41, 12:03:55 — tools changed: `X` added at index 17; 184,220 tokens re-written; $2.30 wasted").
// It only words what the analysis found: it never decides a cause or a figure itself.

import { describeChange } from '../prefix/describe-divergence.js';
import type { Miss } from './analyze-captures.js';

const intl = new Intl.NumberFormat('en-US');

/**
 * `Intl.NumberFormat('en-US').format`, with integers (every figure a sentence shows but a TTL or idle time
 * in fractions) grouped here, not through ICU: a live proxy describes every miss it sees.
 */
export const n = {
  format(v: number): string {
    if (!Number.isSafeInteger(v) || Object.is(v, -0)) return intl.format(v);
    const digits = String(v < 0 ? -v : v);
    let out = digits.slice(0, digits.length % 3 || 3);
    for (let i = out.length; i < digits.length; i += 3) out += `,${digits.slice(i, i + 3)}`;
    return v < 0 ? `-${out}` : out;
  },
};

export function formatUsd(v: number | null): string {
  if (v === null) return 'unpriced';
  if (v !== 0 && Math.abs(v) < 0.01) return `$${v.toFixed(4)}`;
  return `$${v.toFixed(2)}`;
}

export function clockTime(ms: number): string {
  // HH:MM:SS UTC by arithmetic (what toISOString().slice(11, 19) reads), for the years toISOString writes
  // with four digits; outside them, toISOString itself.
  if (!(ms >= 0 && ms < 253402300800000)) return new Date(ms).toISOString().slice(11, 19);
  const s = Math.floor(ms / 1000) % 86400;
  const two = (x: number) => (x < 10 ? `0${x}` : String(x));
  return `${two(Math.floor(s / 3600))}:${two(Math.floor(s / 60) % 60)}:${two(s % 60)}`;
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
  lookback_exceeded: 'beyond the lookback window',
  concurrent: 'sent before the earlier response began',
  thinking_stripped: 'thinking stripped from context',
  unexplained: 'unexplained (the provider did not read a live entry)',
};

/** What each unrecorded part is called in a sentence. */
const PART_NAMES: Record<string, string> = {
  tools: 'tools',
  system: 'system',
  params: 'parameters',
  injected: 'the reminders the client adds to messages',
};

function list(items: readonly string[], last: string): string {
  return items.length < 2 ? (items[0] ?? '') : `${items.slice(0, -1).join(', ')} ${last} ${items.at(-1)}`;
}

/** Where the read ended when the request's source did not record all of it, and what could not be told apart. */
function unrecordedBreak(u: NonNullable<Miss['detail']['unrecorded']>): string {
  const parts = list(
    u.parts.map((p) => PART_NAMES[p] ?? p),
    'or',
  );
  const where = u.inside
    ? `inside ${parts}, which were not recorded`
    : `in the recorded messages, after ${parts} (not recorded)`;
  return `the cached prefix ended after ~${n.format(u.readTokens)} tokens: ${where}; ${list(u.couldBe, 'or')} could not be told apart`;
}

export function describeMiss(m: Miss): string {
  const d = m.detail;
  let what = d.unrecorded ? unrecordedBreak(d.unrecorded) : TITLES[m.cause];
  if (d.change) what += `: ${describeChange(d.change)}`;
  const also = (d.changed ?? []).slice(1);
  if (also.length) what += ` (also changed: ${also.join(', ')})`;
  if (m.cause === 'ttl_expired')
    what += `: idle ${n.format(d.idleSeconds ?? 0)} s against a ${n.format(d.ttlSeconds ?? 0)} s TTL`;
  if (m.cause === 'below_minimum')
    what += `: ${n.format(d.prefixTokens ?? 0)} tokens, the model caches from ${n.format(d.minimumTokens ?? 0)}`;
  if (m.cause === 'lookback_exceeded' && d.lookbackDistance)
    what += `: the last write was ${d.lookbackDistance} blocks back`;
  else if (m.cause === 'lookback_exceeded')
    what += ': no breakpoint looks back far enough to the cached entry';
  if (m.cause === 'thinking_stripped' && d.evidence?.reason === 'thinking_stripped')
    what += `: new user content made ${m.model ?? 'this model'} drop ${n.format(d.evidence.blocks)} earlier thinking block${d.evidence.blocks === 1 ? '' : 's'} (${n.format(d.evidence.strippedTokens)} tokens), so no entry written with them can be read; Opus 4.5+ and Sonnet 4.6+ keep thinking`;
  if (m.cause === 'unexplained' && !d.unrecorded)
    what += `: expected to read ${n.format(d.expectedReadTokens ?? 0)}, read ${n.format(d.actualReadTokens ?? 0)}`;
  if (m.cause === 'concurrent')
    what +=
      d.evidence?.reason === 'other_route'
        ? ': routed to another cache machine (overflow)'
        : `: ${(d.idleSeconds ?? 0).toFixed(1)} s after its parent started`;
  if (d.warmFrom) what += `: started warm from session ${d.warmFrom.session}`;
  if (d.byteOffset !== undefined) what += ` (byte ${n.format(d.byteOffset)})`;
  const cost =
    m.cause === 'cold_start'
      ? ''
      : `; ${n.format(m.rewrittenTokens)} tokens re-written; ${m.waste === null ? 'waste unpriced' : `${formatUsd(m.waste)} wasted`}`;
  const diag = m.providerDiagnosis
    ? `; provider says ${m.providerDiagnosis.reason}${m.providerDiagnosis.agrees ? '' : ' (disagrees)'}`
    : '';
  return `turn ${m.turn}, ${clockTime(m.time)} — ${what}${cost}${diag}`;
}
