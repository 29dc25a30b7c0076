// The replay gate: runs captured requests (full mode) through fixes with fresh state and checks that they
// keep the prefix stable, harm nothing, drop nothing undeclared, and leave untouched requests byte-identical.

import { anthropicBreakpoints, checkAnthropicRequest } from '../cache/anthropic-rules.js';
import { simulateRequests, type TimedRequest } from '../cache/simulate-requests.js';
import { readCaptures } from '../capture/capture-reader.js';
import type { CaptureRecord } from '../capture/capture-record.js';
import { isObj, type Message, units } from '../fixes/anthropic-messages.js';
import { type DeclaredChange, type Fix, runFixes } from '../fixes/fix.js';
import { type Prefix, PrefixBuilder } from '../prefix/build-prefix.js';
import { comparePrefixes } from '../prefix/first-divergence.js';
import { explicitSession } from '../proxy/session-key.js';
import { formatFromRoute } from '../wire/request-body.js';

export type Invariant = 'stability' | 'safety' | 'conservation' | 'fidelity';

export interface Violation {
  invariant: Invariant;
  requestId: string;
  session: string;
  /** Where: the request's position in the replay (1-based) and what in it. */
  position: number;
  message: string;
}

export interface SessionTokens {
  session: string;
  /** The model of the session's first request (for pricing). */
  model: string | undefined;
  requests: number;
  withoutFixes: { written: number; read: number; rewritten: number };
  withFixes: { written: number; read: number; rewritten: number };
}

export interface ReplayResult {
  requests: number;
  changed: number;
  skipped: number;
  violations: Violation[];
  sessions: SessionTokens[];
  totals: { withoutFixes: number; withFixes: number };
}

export interface ReplayOptions {
  fixes: readonly Fix[];
  /** Replay a proxy restart before the request at this 1-based position: state is serialized and read back. */
  restartAt?: number;
  onWarning?: (message: string) => void;
}

interface Replayed {
  record: CaptureRecord;
  session: string;
  client: Prefix;
  forwarded: Prefix;
}

/** Replays every full-mode record of the given capture files or folders. */
export async function replayCaptures(
  paths: readonly string[],
  options: ReplayOptions,
): Promise<ReplayResult> {
  const builder = new PrefixBuilder();
  const states = new Map<string, Map<string, unknown>>();
  const previous = new Map<string, Replayed>();
  const replayed: Replayed[] = [];
  const violations: Violation[] = [];
  let position = 0;
  let changed = 0;
  let skipped = 0;
  for await (const { record, body, clientBody } of readCaptures(
    paths,
    options.onWarning ? { onWarning: options.onWarning } : {},
  )) {
    const format = formatFromRoute(record.route);
    const clientBytes = clientBody ?? body;
    if (!format || !clientBytes || record.method !== 'POST') {
      skipped++;
      continue;
    }
    position++;
    if (options.restartAt === position) {
      // A restart: state survives only as JSON (what the session store keeps).
      for (const [k, v] of states)
        states.set(k, new Map(JSON.parse(JSON.stringify([...v])) as Array<[string, unknown]>));
    }
    const betas = record.headers['anthropic-beta'];
    let client: Prefix;
    try {
      client = builder.parse(clientBytes, { format, headers: { 'anthropic-beta': betas } });
    } catch {
      skipped++;
      continue;
    }
    const session = explicitSession(new Headers(record.headers), client.body.fields)?.key ?? 'default';
    const before = Buffer.from(clientBytes);
    const out = runFixes(
      options.fixes,
      { body: clientBytes, prefix: client, headers: betas ? { 'anthropic-beta': betas } : {} },
      states.get(session) ?? new Map(),
      {
        provider: format === 'anthropic-messages' ? 'anthropic' : 'openai',
        route: record.route,
        now: record.times.start,
        session,
      },
      (b) => builder.parse(b, { format }),
    );
    states.set(session, out.states);
    if (out.changed) changed++;
    const v = (invariant: Invariant, message: string) =>
      violations.push({ invariant, requestId: record.id, session, position, message });
    // 4. Fidelity: untouched means byte-identical, and the client's bytes were not mutated in place.
    if (!before.equals(clientBytes)) v('fidelity', 'a fix changed the client request bytes in place');
    if (!out.changed && !out.body.equals(before))
      v('fidelity', 'no fix declared a change, yet the forwarded bytes differ from the client bytes');
    let forwarded: Prefix;
    try {
      forwarded = builder.parse(out.body, {
        format,
        headers: { 'anthropic-beta': out.headers['anthropic-beta'] },
      });
    } catch (err) {
      v('safety', `the forwarded body does not parse: ${(err as Error).message}`);
      continue;
    }
    if (format === 'anthropic-messages') {
      checkSafety(client, forwarded, out.changes, v);
      checkConservation(client, forwarded, out.changes, v);
    }
    // 1. Stability: the forwarded prefix never breaks earlier than the client's own input did.
    const prev = previous.get(session);
    if (prev) {
      const c = comparePrefixes(prev.client, client);
      const f = comparePrefixes(prev.forwarded, forwarded);
      if (f.divergence && !c.divergence) {
        v(
          'stability',
          `the client only appended, but the forwarded prefix diverges at block ${f.divergence.blockIndex} (${f.divergence.level})`,
        );
      } else if (f.divergence && c.divergence && f.divergence.sharedTokens < c.divergence.sharedTokens) {
        v(
          'stability',
          `the forwarded prefix breaks earlier (${f.divergence.sharedTokens} tokens shared) than the client's (${c.divergence.sharedTokens})`,
        );
      }
    }
    const entry = { record, session, client, forwarded };
    previous.set(session, entry);
    replayed.push(entry);
  }
  const sessions = tokensBySession(replayed);
  return {
    requests: position,
    changed,
    skipped,
    violations,
    sessions,
    totals: {
      withoutFixes: sessions.reduce((t, s) => t + s.withoutFixes.rewritten, 0),
      withFixes: sessions.reduce((t, s) => t + s.withFixes.rewritten, 0),
    },
  };
}

function messagesOf(p: Prefix): Message[] {
  const m = p.body.value().messages;
  return Array.isArray(m) ? (m.filter(isObj) as Message[]) : [];
}

/** The forwarded messages without the ones the fixes declared they inserted. */
function withoutInserted(forwarded: Prefix, changes: readonly DeclaredChange[]): Message[] {
  const inserted = new Set(changes.flatMap((c) => (c.kind === 'insert-message' ? [c.index] : [])));
  return messagesOf(forwarded).filter((_, i) => !inserted.has(i));
}

/** 2. Safety: the provider would accept it, and roles and message count hold apart from declared changes. */
function checkSafety(
  client: Prefix,
  forwarded: Prefix,
  changes: readonly DeclaredChange[],
  v: (i: Invariant, m: string) => void,
): void {
  const body = forwarded.body.value();
  const bp = anthropicBreakpoints(forwarded);
  if (!Array.isArray(bp)) v('safety', `the simulator would reject it: ${bp.message}`);
  const rule = checkAnthropicRequest(body, forwarded);
  if (rule) v('safety', `the simulator would reject it: ${rule.message}`);
  const mine = messagesOf(client);
  const theirs = withoutInserted(forwarded, changes);
  if (changes.some((c) => c.kind === 'restructure')) return; // shape may differ; conservation checks content
  if (mine.length !== theirs.length) {
    v('safety', `${mine.length} messages sent, ${theirs.length} forwarded (besides declared insertions)`);
    return;
  }
  for (let i = 0; i < mine.length; i++) {
    if (mine[i]?.role !== theirs[i]?.role) {
      v('safety', `message ${i}: role ${mine[i]?.role} became ${theirs[i]?.role}`);
      return;
    }
  }
}

/** 3. Conservation: every content unit and tool the client sent is forwarded. */
function checkConservation(
  client: Prefix,
  forwarded: Prefix,
  changes: readonly DeclaredChange[],
  v: (i: Invariant, m: string) => void,
): void {
  const mine = units(messagesOf(client));
  const theirs = units(withoutInserted(forwarded, changes));
  const n = Math.max(mine.length, theirs.length);
  for (let i = 0; i < n; i++) {
    const a = mine[i];
    const b = theirs[i];
    if (!a || !b || a.role !== b.role || a.id !== b.id) {
      v(
        'conservation',
        `content unit ${i} (${a ? `${a.role} ${String(a.block.type)}` : 'none'}) is not forwarded as sent`,
      );
      return;
    }
  }
  const names = (p: Prefix) => {
    const tools = p.body.value().tools;
    return new Set(Array.isArray(tools) ? tools.filter(isObj).map((t) => String(t.name)) : []);
  };
  const forwardedTools = names(forwarded);
  for (const name of names(client)) {
    if (!forwardedTools.has(name)) v('conservation', `tool ${name} was sent but not forwarded`);
  }
}

/** Tokens written beyond each request's growth, through the cache model, with and without the fixes. */
function tokensBySession(replayed: readonly Replayed[]): SessionTokens[] {
  const run = (pick: (r: Replayed) => Prefix) => {
    const requests: TimedRequest[] = replayed.map((r) => ({
      prefix: pick(r),
      scope: r.session,
      start: r.record.times.start,
      firstByte: r.record.times.firstByte ?? r.record.times.start,
    }));
    return simulateRequests(requests);
  };
  const without = run((r) => r.client);
  const withFixes = run((r) => r.forwarded);
  const out = new Map<string, SessionTokens>();
  const lastTotal = new Map<string, { a: number; b: number }>();
  replayed.forEach((r, i) => {
    const s = out.get(r.session) ?? {
      session: r.session,
      model: r.client.model,
      requests: 0,
      withoutFixes: { written: 0, read: 0, rewritten: 0 },
      withFixes: { written: 0, read: 0, rewritten: 0 },
    };
    s.requests++;
    const prev = lastTotal.get(r.session) ?? { a: 0, b: 0 };
    for (const [side, res, total, prevTotal] of [
      [s.withoutFixes, without[i], r.client.totalTokens, prev.a],
      [s.withFixes, withFixes[i], r.forwarded.totalTokens, prev.b],
    ] as const) {
      if (!res || !('result' in res)) continue;
      const { written, read } =
        res.provider === 'anthropic'
          ? {
              written: res.result.usage.cache_creation_input_tokens,
              read: res.result.usage.cache_read_input_tokens,
            }
          : { written: res.result.cacheWriteTokens ?? 0, read: res.result.cachedTokens };
      side.written += written;
      side.read += read;
      side.rewritten += Math.max(0, written - Math.max(0, total - prevTotal));
    }
    lastTotal.set(r.session, { a: r.client.totalTokens, b: r.forwarded.totalTokens });
    out.set(r.session, s);
  });
  return [...out.values()];
}
