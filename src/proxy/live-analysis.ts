// The proxy's live view: every finished exchange goes through the report's own analyzer (after the
// response ended, never on the request path) and comes out as a row for the page, the log and the metrics.
// In a fleet the analyzer reads every proxy's records from the shared feed and rows are made of this
// proxy's only, so the fleet's live views add up to its merged report. It never computes a cause itself;
// it keeps a bounded window of rows, sessions and per-minute totals.

import {
  type AnalyzedRequest,
  Analyzer,
  type AnalyzerBounds,
  type BustCause,
  type UnfixedCost,
} from '../analyze/analyze-captures.js';
import { describeMiss } from '../analyze/describe-miss.js';
import type { PriceTable } from '../analyze/price-table.js';
import { capLabel, LABEL_MAX } from '../core/cap-label.js';
import { StepQueue } from '../core/step-queue.js';
import { runStepped } from '../core/stepped-work.js';
import { drainSteps } from '../core/steps.js';
import type { CaptureRecord } from '../record/capture-record.js';
import { clockTimeMs } from '../report/miss-line.js';
import type { LiveFeed } from '../state/proxy-state.js';

/** One finished request as the page and the log show it. */
export interface LiveRequest {
  id: string;
  time: number;
  session: string;
  conversation: string;
  relation: AnalyzedRequest['relation'];
  turn: number;
  provider: string;
  model: string | undefined;
  status: number | undefined;
  inputTokens: number;
  readTokens: number;
  writtenTokens: number;
  /** This request's token-weighted hit rate (null when the usage reported no cache fields). */
  hitRate: number | null;
  cost: number | null;
  /** The model has no price row of its own: the row it was priced from. */
  pricedAs?: string;
  cause?: BustCause;
  /** The analyzer's sentence for the miss. */
  sentence?: string;
  rewrittenTokens?: number;
  waste?: number | null;
  /** What each fix did to this request, in its own notes. */
  fixes: Array<{ fix: string; changed: boolean; notes: string[] }>;
  /** It went out unfixed because the shared state could not be had (a fleet's Redis was out). */
  unfixed?: true;
}

/** A session's running totals. */
export interface LiveSession {
  session: string;
  requests: number;
  inputTokens: number;
  readTokens: number;
  cost: number;
  waste: number;
  last: number;
}

/** Totals per minute, for the over-time charts. */
export interface LiveMinute {
  minute: number;
  inputTokens: number;
  readTokens: number;
  waste: number;
  requests: number;
}

/** What the page loads first. */
export interface LiveSnapshot {
  requests: LiveRequest[];
  sessions: LiveSession[];
  minutes: LiveMinute[];
  totals: { requests: number; inputTokens: number; readTokens: number; cost: number; waste: number };
  /** The requests that went out unfixed because the shared state could not be had, and their misses' cost. */
  unfixed: UnfixedCost;
}

export interface LiveAnalysisOptions {
  prices: PriceTable;
  /** Rows kept for the page (default 500), sessions (default 200), minutes (default 180). */
  maxRows?: number;
  maxSessions?: number;
  maxMinutes?: number;
  /** What the analyzer remembers (default {@link LIVE_BOUNDS}). */
  bounds?: AnalyzerBounds;
}

/**
 * The live analyzer's memory: as many conversations as the proxy's state keeps by default, parents for
 * the latest 4,096 requests, and the cache entries of those conversations.
 */
export const LIVE_BOUNDS: AnalyzerBounds = {
  conversations: 10_000,
  recent: 4_096,
  cacheEntries: 100_000,
  sessions: 10_000,
};

/** What the row was made from, for listeners that need more than the page shows (OTLP). */
export interface LiveDetail {
  record: CaptureRecord;
  analyzed: AnalyzedRequest;
}

export type LiveListener = (row: LiveRequest, detail: LiveDetail) => void;

export class LiveAnalysis {
  private readonly analyzer: Analyzer;
  private readonly rows: LiveRequest[] = [];
  private readonly sessions = new Map<string, LiveSession>();
  private readonly minutes = new Map<number, LiveMinute>();
  private readonly listeners = new Set<LiveListener>();
  private readonly totals = { requests: 0, inputTokens: 0, readTokens: 0, cost: 0, waste: 0 };
  private readonly unfixedCost: UnfixedCost = { requests: 0, rewrittenTokens: 0, waste: 0 };
  private readonly max: { rows: number; sessions: number; minutes: number };
  /** Stepped adds, one record at a time in the order they came (the analyzer is not re-entrant). */
  private readonly line = new StepQueue();
  /** In a fleet: where this proxy's records go, and every proxy's come from. */
  private feed: LiveFeed | undefined;

  constructor(options: LiveAnalysisOptions) {
    // Rows and misses are handed on, not kept: memory stays bounded however long the proxy runs.
    this.analyzer = new Analyzer({
      prices: options.prices,
      keepRequests: false,
      keepMisses: false,
      bounds: options.bounds ?? LIVE_BOUNDS,
    });
    this.max = {
      rows: options.maxRows ?? 500,
      sessions: options.maxSessions ?? 200,
      minutes: options.maxMinutes ?? 180,
    };
  }

  /** Whether a stepped add is under way (a one-step add would finish it first). */
  get busy(): boolean {
    return this.line.busy;
  }

  /**
   * In a fleet: this proxy's records go to the shared feed, and the analyzer reads every proxy's records
   * from it in one order (each after its parent); rows, listeners and totals are this proxy's records only.
   */
  useFeed(feed: LiveFeed): void {
    this.feed = feed;
    feed.start(async (record, own) => {
      if (own) await runStepped(this.rowSteps(record));
      else await runStepped(this.observeSteps(record));
    });
  }

  /**
   * Analyzes a finished exchange and tells every listener; a record the analyzer skips returns undefined.
   * In a fleet the record is published and analyzed when the feed brings it back (undefined here).
   */
  add(record: CaptureRecord): LiveRequest | undefined {
    return drainSteps(this.addSteps(record));
  }

  /**
   * {@link add} in bounded steps (the analyzer's), after every add queued before it: a 100,000-message
   * record is analyzed over many slices, and another record's analysis never runs in its middle.
   */
  *addSteps(full: CaptureRecord): Generator<void, LiveRequest | undefined> {
    // Labels and model names as long as a client made them are kept and shown capped (cap-label.ts).
    const record = withCappedLabels(full);
    if (this.feed) {
      // A record the fleet cannot have (Redis out) is this proxy's alone: analyzed here, on what it saw.
      void this.feed.publish(record).then((ok) => {
        if (!ok) runStepped(this.rowSteps(record)).catch(() => {});
      });
      return undefined;
    }
    return yield* this.rowSteps(record);
  }

  /**
   * A record the analyzer learns from (conversations, cache, parents) without a row, a listener or a total:
   * what came before the window a view shows (`cacheward watch --since`).
   */
  observe(record: CaptureRecord): void {
    drainSteps(this.observeSteps(record));
  }

  /** Whether the analyzer still holds this request's place in its conversation (see `Analyzer.remembers`). */
  remembers(id: string): boolean {
    return this.analyzer.remembers(id);
  }

  /** Another proxy's record: the analyzer learns from it (conversations, cache, parents); no row. */
  private *observeSteps(record: CaptureRecord): Generator<void, void> {
    yield* this.line.run(this.analyzer.addSteps(withCappedLabels(record)));
  }

  private *rowSteps(record: CaptureRecord): Generator<void, LiveRequest | undefined> {
    const a = yield* this.line.run(this.analyzer.addSteps(record));
    if (!a) return undefined;
    const u = a.usage;
    const row: LiveRequest = {
      id: a.id,
      time: a.time,
      session: a.session,
      conversation: a.conversation,
      relation: a.relation,
      turn: a.turn,
      provider: a.provider,
      model: a.model,
      status: a.status,
      inputTokens: u?.inputTotal ?? 0,
      readTokens: u?.cacheRead ?? 0,
      writtenTokens: u?.cacheWrite ?? 0,
      hitRate: u?.cacheReported && u.inputTotal > 0 ? u.cacheRead / u.inputTotal : null,
      cost: a.cost?.total ?? null,
      fixes: record.fixes.map((f) => ({ fix: f.fix, changed: f.changed, notes: f.notes })),
    };
    if (a.unfixed) row.unfixed = true;
    if (a.pricedAs) row.pricedAs = a.pricedAs;
    if (a.miss) {
      row.cause = a.miss.cause;
      row.sentence = describeMiss(a.miss);
      row.rewrittenTokens = a.miss.rewrittenTokens;
      row.waste = a.miss.waste;
    }
    this.tally(row);
    for (const l of this.listeners) l(row, { record, analyzed: a });
    return row;
  }

  subscribe(listener: LiveListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  snapshot(): LiveSnapshot {
    return {
      requests: [...this.rows],
      sessions: [...this.sessions.values()].sort((x, y) => y.last - x.last),
      minutes: [...this.minutes.values()].sort((x, y) => x.minute - y.minute),
      totals: { ...this.totals },
      unfixed: this.unfixed(),
    };
  }

  /** What the requests that went out unfixed (shared state out) cost, as analyzed so far. */
  unfixed(): UnfixedCost {
    return { ...this.unfixedCost };
  }

  private tally(row: LiveRequest): void {
    this.rows.push(row);
    if (this.rows.length > this.max.rows) this.rows.shift();
    const waste = row.waste ?? 0;
    if (row.unfixed) {
      this.unfixedCost.requests++;
      this.unfixedCost.rewrittenTokens += row.rewrittenTokens ?? 0;
      this.unfixedCost.waste += waste;
    }
    this.totals.requests++;
    this.totals.inputTokens += row.hitRate === null ? 0 : row.inputTokens;
    this.totals.readTokens += row.readTokens;
    this.totals.cost += row.cost ?? 0;
    this.totals.waste += waste;
    const s = this.sessions.get(row.session) ?? {
      session: row.session,
      requests: 0,
      inputTokens: 0,
      readTokens: 0,
      cost: 0,
      waste: 0,
      last: row.time,
    };
    s.requests++;
    s.inputTokens += row.hitRate === null ? 0 : row.inputTokens;
    s.readTokens += row.readTokens;
    s.cost += row.cost ?? 0;
    s.waste += waste;
    s.last = Math.max(s.last, row.time);
    this.sessions.delete(row.session);
    this.sessions.set(row.session, s);
    if (this.sessions.size > this.max.sessions) {
      const oldest = this.sessions.keys().next().value;
      if (oldest !== undefined) this.sessions.delete(oldest);
    }
    const minute = Math.floor(row.time / 60_000) * 60_000;
    const m = this.minutes.get(minute) ?? { minute, inputTokens: 0, readTokens: 0, waste: 0, requests: 0 };
    m.requests++;
    m.inputTokens += row.hitRate === null ? 0 : row.inputTokens;
    m.readTokens += row.readTokens;
    m.waste += waste;
    this.minutes.set(minute, m);
    if (this.minutes.size > this.max.minutes) {
      const first = Math.min(...this.minutes.keys());
      this.minutes.delete(first);
    }
  }
}

/** The record, or a copy with its session label and model names capped when one is longer than the cap. */
function withCappedLabels(r: CaptureRecord): CaptureRecord {
  const long = (v: string | undefined) => v !== undefined && v.length > LABEL_MAX;
  if (!long(r.session.key) && !long(r.model) && !long(r.responseModel)) return r;
  const out: CaptureRecord = { ...r, session: { ...r.session, key: capLabel(r.session.key) } };
  if (r.model !== undefined) out.model = capLabel(r.model);
  if (r.responseModel !== undefined) out.responseModel = capLabel(r.responseModel);
  return out;
}

/** The log line for a finished request: time, session, model, hit rate, cause when it missed, cost. */
export function liveLogLine(r: LiveRequest): string {
  const hit = r.hitRate === null ? 'hit n/a' : `hit ${(r.hitRate * 100).toFixed(1)}%`;
  const cost = r.cost === null ? 'unpriced' : `$${r.cost.toFixed(4)}`;
  const miss =
    r.cause && r.cause !== 'cold_start' ? ` ${r.cause}${r.waste ? ` (-$${r.waste.toFixed(4)})` : ''}` : '';
  return `${clockTimeMs(r.time)} ${r.session} ${r.model ?? '?'} ${r.status ?? '-'} ${hit}${miss} ${cost}`;
}
