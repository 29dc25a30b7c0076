// The one table from evidence to cause: the conversation's relation, the first divergence from the
// parent, the cache model's evidence and the provider's reported read give exactly one cause per miss.
// Pure and small on purpose; it never looks at bodies, times of day or TTL constants of its own.

import type { CacheEvidence, Unreadable } from '../cache/cache-evidence.js';
import type { Relation } from '../conversation/conversation-store.js';
import type { Divergence, PrefixChange } from '../prefix/first-divergence.js';
import type { UnrecordedPart } from '../record/capture-record.js';
import type { BustCause } from './bust-cause.js';
import { locateBreak, type UnrecordedBreak } from './unrecorded-break.js';

export type { BustCause } from './bust-cause.js';

/** Everything one decision needs. Tokens are the prefix model's estimates (not provider tokens). */
export interface CauseInput {
  relation: Relation;
  /** No parent: the request shares no history with any earlier one. */
  hasParent: boolean;
  /** What the parent had cached once it was done (read or written). */
  parentCached: number;
  /** The first divergence from the parent's prefix, null when this request extends it. */
  divergence: Divergence | null;
  /** Tokens this request shares with the parent's prefix. */
  shared: number;
  /** What the provider read (its tokens, scaled to estimates). */
  read: number;
  /** What the provider wrote (scaled), and whether writes are reported at all. */
  written: number;
  /** This request's own size. */
  total: number;
  evidence: CacheEvidence | undefined;
  /** It started before the parent's response began. */
  beforeParentResponse: boolean;
  /** Seconds since the parent started. */
  idleSeconds: number;
  /** What the request's source did not record, and where the block standing for it ends (estimates). */
  unrecorded?: { parts: readonly UnrecordedPart[]; tokens: number };
}

/** The decision: a cause, the tokens re-written because of it (estimates) and what the evidence said. */
export interface CauseDecision {
  cause: BustCause;
  rewritten: number;
  change?: PrefixChange;
  changed?: Divergence['changed'];
  blockIndex?: number;
  evidence?: Unreadable;
  /** An `unexplained` miss of a request whose source did not record all of it: where the read ended. */
  unrecorded?: UnrecordedBreak;
}

/** The cause a prefix change stands for, in a line (not a fork). */
export function structuralCause(d: Divergence): BustCause {
  if (d.change.type === 'params')
    return d.change.params.some((p) => p.name === 'model') ? 'model_changed' : 'params_changed';
  if (d.level === 'tools') return 'tools_changed';
  if (d.level === 'system') return 'system_changed';
  return 'messages_edited';
}

const STRUCTURAL: ReadonlySet<BustCause> = new Set([
  'tools_changed',
  'system_changed',
  'messages_edited',
  'params_changed',
  'model_changed',
]);

/** Whether a cause says the prefix itself changed (and so becomes `fork_diverged` in a fork). */
export function isStructural(cause: BustCause): boolean {
  return STRUCTURAL.has(cause);
}

/** Tolerance for estimate noise and provider rounding: 2% of what was at stake, at least 16 tokens. */
const tolerance = (stake: number) => Math.max(16, stake * 0.02);

/** One cause for a request, or undefined when nothing cached was lost. */
export function decideCause(x: CauseInput): CauseDecision | undefined {
  // A request with no input at all (Codex's empty warm-up on its WebSocket) had nothing to cache or lose.
  if (x.total <= 0) return undefined;
  const ev = x.evidence;
  const below = ev?.unreadable.find((u) => u.reason === 'below_minimum');
  if (!x.hasParent) {
    if (below && x.written === 0) return { cause: 'below_minimum', rewritten: 0, evidence: below };
    // Another conversation's entry the model says was readable (a fork into a new session, a warm start),
    // and the provider read less: its miss, as it would be mid-conversation, not a free first write.
    if (ev && ev.readTokens > x.read + tolerance(ev.readTokens))
      return unexplained(x, ev.readTokens - Math.max(0, x.read));
    // Where writes are not reported, what the model says it left cached beyond what it found (the part
    // of the hit that automatic caching's rounding withheld from the read was found, not written).
    const rounded = ev?.unreadable.find((u) => u.reason === 'rounded');
    const found = (ev?.readTokens ?? 0) + (rounded?.reason === 'rounded' ? rounded.tokens : 0);
    const wrote = x.written > 0 || (ev !== undefined && !ev.writesReported && ev.cachedAfterTokens > found);
    return wrote ? { cause: 'cold_start', rewritten: 0 } : undefined;
  }
  if (x.parentCached <= 0) {
    if (below && x.read === 0) return { cause: 'below_minimum', rewritten: 0, evidence: below };
    return undefined;
  }
  const tol = tolerance(x.parentCached);
  const reusable = Math.min(x.parentCached, x.shared);
  const d = x.divergence;
  // 1. The prefix changed under what the parent had cached.
  if (d && x.parentCached - reusable > tol && x.read < x.parentCached - tol) {
    const cause = x.relation === 'fork' ? 'fork_diverged' : structuralCause(d);
    return {
      cause,
      rewritten: Math.max(0, x.parentCached - Math.max(0, x.read)),
      change: d.change,
      changed: d.changed,
      blockIndex: d.blockIndex,
    };
  }
  // 2. It shares what the parent cached: did it read it?
  if (x.read >= reusable - tol) return undefined;
  const rewritten = reusable - x.read;
  // 3. The model could read more than the provider did: the one case nothing explains.
  if (ev && ev.readTokens > x.read + tol) return unexplained(x, rewritten);
  // 4. What the provider's rounding withheld of the hit is no loss (automatic caching reports multiples).
  const rounded = ev?.unreadable.find((u) => u.reason === 'rounded');
  if (rounded?.reason === 'rounded' && rewritten <= rounded.tokens + tol) return undefined;
  // What explains the loss lies beyond the read and within what the parent had cached: an entry further on
  // (a sibling's write still pending, say) is not what this request lost.
  const why = ev?.unreadable.find(
    (u) =>
      u.reason === 'other_route' ||
      (u.reason !== 'below_minimum' &&
        u.reason !== 'rounded' &&
        u.reason !== 'thinking_stripped' &&
        u.tokens <= reusable + tol),
  );
  // An older model left earlier thinking out of the prompt: the parent cached past the first thinking
  // block, so its entry held it, and no entry that held it can be read again (all of it is lost, not
  // only what lies past the thinking).
  const stripped = ev?.unreadable.find((u) => u.reason === 'thinking_stripped');
  if (stripped && !x.beforeParentResponse && why?.reason !== 'pending' && reusable > stripped.tokens)
    return { cause: 'thinking_stripped', rewritten, evidence: stripped };
  if (x.beforeParentResponse || why?.reason === 'pending')
    return { cause: 'concurrent', rewritten, ...(why ? { evidence: why } : {}) };
  if (why?.reason === 'expired') return { cause: 'ttl_expired', rewritten, evidence: why };
  if (why?.reason === 'beyond_lookback') return { cause: 'lookback_exceeded', rewritten, evidence: why };
  if (why?.reason === 'other_route') return { cause: 'concurrent', rewritten, evidence: why };
  if (below) return { cause: 'below_minimum', rewritten, evidence: below };
  // The model read no more than the provider, and the prefix changed inside what the parent had cached:
  // the change took the parent's entry with it, however few tokens it moved (an edit of the parent's last
  // block, where its breakpoint was, leaves every token before it shared and no entry to read them from).
  if (ev && d && d.sharedTokens < x.parentCached)
    return {
      cause: x.relation === 'fork' ? 'fork_diverged' : structuralCause(d),
      rewritten,
      change: d.change,
      changed: d.changed,
      blockIndex: d.blockIndex,
    };
  return unexplained(x, rewritten);
}

/** `unexplained`, located where the source did not record everything (it names what could not be told apart). */
function unexplained(x: CauseInput, rewritten: number): CauseDecision {
  const u = x.unrecorded;
  return u
    ? { cause: 'unexplained', rewritten, unrecorded: locateBreak(u.parts, u.tokens, x.read) }
    : { cause: 'unexplained', rewritten };
}
