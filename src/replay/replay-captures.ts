// The replay gate: runs captured requests (full mode) through the fixes exactly as the proxy does (the same
// conversation resolver, state from the parent request, the same fix stage and stability guard) and checks
// that they keep the prefix stable, harm nothing, drop nothing undeclared, and leave every byte outside their
// declared patches as the client sent it.

import { Analyzer } from '../analyze/analyze-captures.js';
import { PriceTable } from '../analyze/price-table.js';
import { anthropicBreakpoints, checkAnthropicRequest } from '../cache/anthropic-rules.js';
import { openaiDefaultRetention } from '../cache/openai-rules.js';
import { simulateRequests, type TimedRequest } from '../cache/simulate-requests.js';
import { readCaptures } from '../capture/capture-reader.js';
import {
  ConversationTracker,
  countsAsTurn,
  recordedConversation,
} from '../conversation/conversation-tracker.js';
import { LruMap } from '../core/lru-map.js';
import { historyUnits, isObj, type Message } from '../fixes/anthropic-messages.js';
import { undeclaredDifference } from '../fixes/byte-patch.js';
import type { DeclaredChange, Fix } from '../fixes/fix.js';
import { runFixStage } from '../fixes/fix-stage.js';
import type { ForwardedPair } from '../fixes/stability.js';
import { afterRefusal } from '../fixes/withdrawal.js';
import { type Prefix, PrefixBuilder } from '../prefix/build-prefix.js';
import { type CaptureRecord, capturePrefix } from '../record/capture-record.js';
import { FixStateStore } from '../state/fix-state-store.js';
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
  let conversations = new ConversationTracker();
  let fixStates = new FixStateStore();
  const pairs = new LruMap<ForwardedPair>(4_096);
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
    // count_tokens calls and requests the upstream refused are no turn of anybody: nothing to check.
    if (!format || !clientBytes || record.method !== 'POST' || !countsAsTurn(record.route, record.status)) {
      skipped++;
      continue;
    }
    position++;
    if (options.restartAt === position) {
      // A restart: what survives is what the proxy's state file keeps, as JSON.
      const doc = JSON.parse(
        JSON.stringify({
          conversations: conversations.snapshot(),
          states: [...conversations.snapshot().requests].flatMap((r) => {
            const st = fixStates.get(r.id);
            return st ? [[r.id, Object.fromEntries(st)]] : [];
          }),
        }),
      ) as {
        conversations: ReturnType<ConversationTracker['snapshot']>;
        states: Array<[string, Record<string, unknown>]>;
      };
      conversations = new ConversationTracker();
      conversations.restore(doc.conversations);
      fixStates = new FixStateStore();
      for (const [id, st] of doc.states) fixStates.set(id, new Map(Object.entries(st)));
    }
    const betas = record.headers['anthropic-beta'];
    let client: Prefix;
    try {
      client = builder.parse(clientBytes, { format, headers: { 'anthropic-beta': betas } });
    } catch {
      skipped++;
      continue;
    }
    const tracked = conversations.resolve(record.id, client, record.headers, record.times.start);
    const res = tracked.resolution;
    const session = recordedConversation(tracked).session.key;
    const before = Buffer.from(clientBytes);
    const parentPair = res.parent ? pairs.get(res.parent) : undefined;
    const out = runFixStage({
      fixes: options.fixes,
      body: clientBytes,
      prefix: client,
      headers: betas ? { 'anthropic-beta': betas } : {},
      states: fixStates.get(res.parent),
      context: {
        provider: format === 'anthropic-messages' ? 'anthropic' : 'openai',
        route: record.route,
        now: record.times.start,
        conversation: res.conversation,
        relation: res.relation,
        ...(tracked.label ? { label: tracked.label.key } : {}),
      },
      ...(parentPair ? { parent: parentPair } : {}),
      reparse: (b, h) => builder.parse(b, { format, headers: { 'anthropic-beta': h['anthropic-beta'] } }),
    });
    conversations.commit(tracked, record.route, record.status);
    // A Responses request chained on this one's response continues it (previous_response_id).
    if (record.responseId) conversations.answered(tracked, record.responseId);
    // The provider refused a fix on this request when it was captured: the proxy sent the client's own bytes
    // and withdrew the fix for the conversation, and so does the replay for the requests after it.
    const refused = record.fixes.filter((f) => f.refused && options.fixes.some((x) => x.name === f.fix));
    const withdrawn = refused.length
      ? afterRefusal(
          { states: out.states, pair: { client: client.blocks, forwarded: out.prefix.blocks } },
          refused.map((f) => f.fix),
          client.model,
          client,
        )
      : undefined;
    fixStates.set(record.id, withdrawn?.states ?? out.states);
    pairs.set(record.id, withdrawn?.pair ?? { client: client.blocks, forwarded: out.prefix.blocks });
    if (out.changed) changed++;
    const v = (invariant: Invariant, message: string) =>
      violations.push({ invariant, requestId: record.id, session, position, message });
    for (const f of refused)
      v(
        'safety',
        `the provider refused ${f.fix} on this request (${f.refused?.status}: ${f.refused?.message}); the proxy sent the client's own bytes and withdrew the fix`,
      );
    // 4. Fidelity: untouched means byte-identical, and the client's bytes were not mutated in place.
    if (!before.equals(clientBytes)) v('fidelity', 'a fix changed the client request bytes in place');
    if (!out.changed && !out.body.equals(before))
      v('fidelity', 'no fix declared a change, yet the forwarded bytes differ from the client bytes');
    // A fix is a patch: every byte outside the changes the fixes declared is the client's, in order.
    const undeclared = out.changed ? undeclaredDifference(before, out.body, out.edits) : undefined;
    if (undeclared) v('fidelity', `a byte outside the declared changes differs: ${undeclared}`);
    const forwarded = out.prefix;
    if (format === 'anthropic-messages' && out.changed) {
      checkSafety(client, forwarded, out.changes, v);
      checkConservation(client, forwarded, out.changes, v);
    }
    // 1. Stability: the fixes alone never break the prefix earlier than the client's own input did (the
    // proxy's live guard is this same check; when it had to step in, the fixes broke the invariant).
    if (out.guard?.broke) {
      const kept = {
        fixed: 'the fixed request',
        'fresh-state': 'the fixes on a fresh state',
        'client-bytes': "the client's bytes",
      };
      v(
        'stability',
        `the fixed request loses ${Math.round(out.guard.forwardedLost)} tokens of its parent's cache, the client's own ${Math.round(out.guard.clientLost)}; the live guard forwarded ${kept[out.guard.kept]}`,
      );
    }
    replayed.push({ record, session, client, forwarded });
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

function insertedAt(changes: readonly DeclaredChange[]): Set<number> {
  return new Set(changes.flatMap((c) => (c.kind === 'insert-message' ? [c.index] : [])));
}

/** The forwarded messages without the ones the fixes declared they inserted. */
function withoutInserted(forwarded: Prefix, changes: readonly DeclaredChange[]): Message[] {
  const inserted = insertedAt(changes);
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
  const mine = historyUnits(client, messagesOf(client)).flat();
  const theirs = historyUnits(forwarded, messagesOf(forwarded))
    .filter((_, i) => !insertedAt(changes).has(i))
    .flat();
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

/**
 * Tokens read, written and re-written per session, with and without the fixes: both sides run through the
 * cache model, and re-written tokens are counted by the analyzer itself (the report's and whatif's count).
 */
function tokensBySession(replayed: readonly Replayed[]): SessionTokens[] {
  const out = new Map<string, SessionTokens>();
  for (const r of replayed) {
    const s = out.get(r.session) ?? {
      session: r.session,
      model: r.client.model,
      requests: 0,
      withoutFixes: { written: 0, read: 0, rewritten: 0 },
      withFixes: { written: 0, read: 0, rewritten: 0 },
    };
    s.requests++;
    out.set(r.session, s);
  }
  const side = (pick: (r: Replayed) => Prefix, tally: (s: SessionTokens) => SessionTokens['withFixes']) => {
    const requests: TimedRequest[] = replayed.map((r) => ({
      prefix: pick(r),
      scope: 'replay',
      start: r.record.times.start,
      firstByte: r.record.times.firstByte ?? r.record.times.start,
      // The same retention the report assumes: as sent, else the provider's default (24h without ZDR).
      openai: {
        ...r.record.cacheOptions,
        retention: r.record.cacheOptions?.retention ?? openaiDefaultRetention(pick(r).model),
      },
    }));
    const results = simulateRequests(requests);
    const analyzer = new Analyzer({ prices: new PriceTable(), keepRequests: false });
    replayed.forEach((r, i) => {
      const res = results[i];
      const s = out.get(r.session) as SessionTokens;
      if (!res || !('result' in res)) return;
      const prefix = pick(r);
      let raw: Record<string, unknown>;
      let read: number;
      let written: number;
      if (res.provider === 'anthropic') {
        raw = { ...res.result.usage, output_tokens: 0 };
        read = res.result.usage.cache_read_input_tokens;
        written = res.result.usage.cache_creation_input_tokens;
      } else {
        const details: Record<string, unknown> = { cached_tokens: res.result.cachedTokens };
        if (res.result.cacheWriteTokens !== undefined)
          details.cache_write_tokens = res.result.cacheWriteTokens;
        raw = { input_tokens: res.result.totalTokens, input_tokens_details: details, output_tokens: 0 };
        read = res.result.cachedTokens;
        written = res.result.cacheWriteTokens ?? 0;
      }
      tally(s).read += read;
      tally(s).written += written;
      const row = analyzer.add({
        ...r.record,
        headers: r.record.headers,
        prefix: capturePrefix(prefix),
        ...(prefix.model ? { model: prefix.model } : {}),
        betas: [...prefix.body.betas],
        usage: { raw },
        status: 200,
        fixes: [],
      });
      tally(s).rewritten += row?.miss?.rewrittenTokens ?? 0;
    });
  };
  side(
    (r) => r.client,
    (s) => s.withoutFixes,
  );
  side(
    (r) => r.forwarded,
    (s) => s.withFixes,
  );
  return [...out.values()];
}
