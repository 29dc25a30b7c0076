// What the proxy asks of its state, wherever it lives: resolve a request and hand over its parent's fix
// state, then commit the request once the upstream answered. Types only; it must never do I/O itself.

import type {
  AnsweredRequest,
  ConversationTracker,
  TrackedRequest,
} from '../conversation/conversation-tracker.js';
import type { HeaderLookup } from '../conversation/session-label.js';
import type { ForwardedPair } from '../fixes/stability.js';
import type { Prefix } from '../prefix/build-prefix.js';
import type { CaptureRecord, FixNote } from '../record/capture-record.js';
import type { RequestFixState } from './fix-state-codec.js';
import type { FixStateHealth } from './fix-state-open.js';
import type { FixStates } from './fix-state-store.js';

/** A request resolved, with what its fixes start from. */
export interface PreparedRequest {
  ok: true;
  tracked: TrackedRequest;
  /** The state the parent request left (undefined: start fresh). */
  states: FixStates | undefined;
  /** The parent's client and forwarded prefixes, for the stability guard. */
  parentPair: ForwardedPair | undefined;
}

/** The state could not be had in time: the client's bytes go out unchanged, no fix, and this says why. */
export interface StateUnavailable {
  ok: false;
  reason: 'unavailable' | 'conflict';
  detail: string;
}

export type PrepareResult = PreparedRequest | StateUnavailable;

/** What became of a commit. */
export interface StateCommit {
  /**
   * `committed`; `recomputed` (another instance changed the conversation first: this request was resolved
   * again on the new state and committed so); `not-turn` (count_tokens, refused); `not-committed` (the
   * state store failed or kept losing: the request's turn is not in the shared state).
   */
  outcome: 'committed' | 'recomputed' | 'not-turn' | 'not-committed';
  /** For the capture record, when there is something to say. */
  note?: FixNote;
}

/** What `/_cacheward/health` says about the state. */
export interface StateHealth {
  kind: 'memory' | 'redis';
  /** Memory state: whether fix state is kept in files (and survives a restart), and why not. */
  fixState?: FixStateHealth;
  status: 'ok' | 'degraded';
  /** Redis: its address (never credentials) and key prefix. */
  url?: string;
  prefix?: string;
  budgetMs?: number;
  /** Redis: how long it may send nothing back now before it counts as out (the budget, or more). */
  waitLimitMs?: number;
  /** Redis: the outage under way (down, silent, out of memory, or an error reply), since when and why. */
  outage?: { kind: string; since: string; reason: string };
  /** Requests that went out unfixed because the state could not be had, and the latest failure. */
  failedOpen: number;
  /** What those requests cost, as the live analysis named their misses (re-written tokens, waste in USD). */
  unfixedCost?: { requests: number; rewrittenTokens: number; waste: number };
  lastFailure?: { at: string; reason: string };
  /** Outages of the state (each counted once however many requests it touched), and when the last ended. */
  outages: number;
  recoveredAt?: string;
  /** Commit races lost and recomputed, and turns that could not be recorded. */
  recomputed: number;
  notCommitted: number;
  /**
   * Redis: whether invalidations flow (so a conversation this proxy served last needs no read), the
   * requests resolved so, and the invalidated keys received.
   */
  readCache?: { tracking: boolean; cached: number; invalidations: number };
  /** Redis: the proxies sharing this state that were alive in the last few seconds. */
  instances?: Array<{ id: string; url: string; pid: number; seenMsAgo: number }>;
  /** This proxy's id among them. */
  instance?: string;
  /** Redis: the feed the live analysis shares with the fleet. */
  feed?: LiveFeedHealth;
}

/**
 * A fleet's shared feed of finished exchanges: every proxy publishes its records, and every proxy's live
 * analysis reads all of them in one order, so each judges what it served on the whole fleet's traffic.
 */
export interface LiveFeed {
  /** Hands a finished record to the fleet; false when it could not (the record is then this proxy's alone). */
  publish(record: CaptureRecord): Promise<boolean>;
  /**
   * Delivers every record of the fleet (what the feed still holds first), each after its parent, saying
   * whether this proxy served it; the next waits for `deliver` to settle.
   */
  start(deliver: (record: CaptureRecord, own: boolean) => Promise<void>): void;
  health(): LiveFeedHealth;
}

/** What health says of the feed. */
export interface LiveFeedHealth {
  /** This proxy's records published, and those it could not publish (analyzed here alone). */
  published: number;
  notPublished: number;
  /** Records read from the feed (every proxy's), this proxy's among them, and unreadable ones. */
  received: number;
  own: number;
  unreadable: number;
  /** Records waiting for their parent to come first. */
  waiting: number;
}

/** The proxy's state: memory (and a state file) on one machine, Redis for a fleet. */
export interface ProxyState {
  readonly kind: 'memory' | 'redis';
  /**
   * When a request is committed: at the upstream's status (memory: at once, in this process), or as the
   * response ends, before its last byte, not waited for (a shared state: its I/O never delays the status
   * and the body, and the client's next request, which can only follow the response, reads after it).
   */
  readonly commitAt: 'status' | 'end';
  /** The tracker the recorder resolves unfixed requests with (under Redis, a local fallback). */
  readonly local: ConversationTracker;
  /** Resolves a request before its fixes run. Never rejects: a failure is a {@link StateUnavailable}. */
  prepare(id: string, prefix: Prefix, headers: HeaderLookup, time: number): Promise<PrepareResult>;
  /** Records a prepared request once the upstream's status is known. Never rejects. */
  commit(
    prepared: PreparedRequest,
    route: string,
    status: number | undefined,
    after: RequestFixState | undefined,
  ): Promise<StateCommit>;
  /** Optionally builds the commit ahead of time, while the upstream works (off the request path). */
  stage?(prepared: PreparedRequest, after: RequestFixState | undefined): void;
  /**
   * Resolves and commits a request no fix looked at, after its response, so shared conversation ids agree
   * across a fleet. Undefined when the recorder's local tracker should do it.
   */
  track?(answered: AnsweredRequest): Promise<TrackedRequest | undefined>;
  /** A fleet's shared feed of records for the live analysis (Redis); none on one machine. */
  readonly feed?: LiveFeed;
  /** Tells the state this proxy's address (for the fleet's instance list). */
  started(url: string): void;
  health(): StateHealth;
  /** Prometheus lines for the state's counters. */
  metricsText(): string;
  /** Saves what must survive and lets go of connections. */
  close(): Promise<void>;
}

/** The note a capture record carries when the state was not there and the request went out unchanged. */
export function unavailableNote(u: StateUnavailable): FixNote {
  return {
    fix: 'state',
    changed: false,
    notes: [
      u.reason === 'conflict'
        ? "skipped: the shared state kept changing while it was read; the client's bytes went out unchanged"
        : "skipped: the shared state was not available (Redis was out); the client's bytes went out unchanged",
    ],
    error: u.detail,
  };
}
