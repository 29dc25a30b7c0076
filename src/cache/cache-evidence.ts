// The cache models' evidence: beside usage, what a request could read and, for what it could not, why
// (an entry that expired with its own TTL, beyond the lookback, still being written, below the minimum,
// another route, rounding). Pure; the analyzer turns evidence into a cause and never guesses TTLs itself.

import { drainSteps, STEP_ITEMS } from '../core/steps.js';
import type { Prefix } from '../prefix/build-prefix.js';
import type { EntryStore } from './entry-store.js';

/** Why a cached prefix longer than what was read could not be read. */
export type Unreadable =
  | { reason: 'expired'; blockIndex: number; tokens: number; ttlMs: number; expiredAt: number }
  | { reason: 'beyond_lookback'; blockIndex: number; tokens: number; distance?: number }
  | { reason: 'pending'; blockIndex: number; tokens: number }
  | { reason: 'below_minimum'; tokens: number; minimum: number }
  | { reason: 'other_route' }
  | { reason: 'rounded'; tokens: number; granularity: number }
  /**
   * Thinking blocks stripped from context (older models, prompt-caching.md "Caching with thinking
   * blocks"): `tokens` of the prefix lie before the first of them, the most an entry written while they
   * were in the prompt can still give; `blocks` and `strippedTokens` say what left the prompt.
   */
  | { reason: 'thinking_stripped'; tokens: number; blocks: number; strippedTokens: number };

/** What one request could read, and why not more. Tokens are the model's estimates. */
export interface CacheEvidence {
  /** What the model read. */
  readTokens: number;
  /** What the model holds of this prefix once the request is done (read or written). */
  cachedAfterTokens: number;
  /** The provider reports writes (Anthropic, GPT-5.6+), or they are only inferred by the rules (automatic). */
  writesReported: boolean;
  /** The TTL of what this request cached: its longest breakpoint's, or the scheme's retention. */
  ttlMs: number;
  /**
   * Entries beyond the read that existed and were not read: the deepest of each kind, deepest first; then
   * below-minimum and rounding notes.
   */
  unreadable: Unreadable[];
}

/**
 * Scans from the end of the prefix back to just past what was read for the entries this request could not
 * read: live but outside every window (`beyond_lookback`), live but still being written (`pending`), or
 * expired (`expired`, with the entry's own TTL). Returns the deepest of each kind, deepest first: the
 * deepest overall may lie beyond what the request's parent cached (a sibling's write), and the analyzer
 * needs the one that explains what was lost.
 */
export function unreadableEntries(
  prefix: Prefix,
  store: EntryStore,
  scope: string,
  start: number,
  readBlock: number,
): Unreadable[] {
  return drainSteps(unreadableEntriesSteps(prefix, store, scope, start, readBlock));
}

/**
 * {@link unreadableEntries} in bounded steps (it yields every {@link STEP_ITEMS} blocks it looks up: a miss
 * on a 100,000-block prefix looks up every block). The store must not change between the steps.
 */
export function* unreadableEntriesSteps(
  prefix: Prefix,
  store: EntryStore,
  scope: string,
  start: number,
  readBlock: number,
): Generator<void, Unreadable[]> {
  const blocks = prefix.blocks;
  const out: Unreadable[] = [];
  const found = new Set<Unreadable['reason']>();
  let step = 0;
  for (let i = blocks.length - 1; i > readBlock && found.size < 3; i--) {
    if (++step === STEP_ITEMS) {
      step = 0;
      yield;
    }
    const block = blocks[i];
    if (!block) continue;
    const key = `${scope}|${block.hash}`;
    const live = store.peek(key, start);
    let u: Unreadable | undefined;
    if (live) {
      u =
        live.readableAt > start
          ? { reason: 'pending', blockIndex: i, tokens: block.cumulativeTokens }
          : { reason: 'beyond_lookback', blockIndex: i, tokens: block.cumulativeTokens };
    } else {
      const gone = store.expired(key, start);
      if (gone)
        u = {
          reason: 'expired',
          blockIndex: i,
          tokens: block.cumulativeTokens,
          ttlMs: gone.ttlMs,
          expiredAt: gone.expiresAt,
        };
    }
    if (u && !found.has(u.reason)) {
      found.add(u.reason);
      out.push(u);
    }
  }
  return out;
}
