// The cache models' evidence: beside usage, what a request could read and, for what it could not, why
// (an entry that expired with its own TTL, beyond the lookback, still being written, below the minimum,
// another route, rounding). Pure; the analyzer turns evidence into a cause and never guesses TTLs itself.

import type { Prefix } from '../prefix/build-prefix.js';
import type { EntryStore } from './entry-store.js';

/** Why a cached prefix longer than what was read could not be read. */
export type Unreadable =
  | { reason: 'expired'; blockIndex: number; tokens: number; ttlMs: number; expiredAt: number }
  | { reason: 'beyond_lookback'; blockIndex: number; tokens: number; distance?: number }
  | { reason: 'pending'; blockIndex: number; tokens: number }
  | { reason: 'below_minimum'; tokens: number; minimum: number }
  | { reason: 'other_route' }
  | { reason: 'rounded'; tokens: number; granularity: number };

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
  /** The deepest entry beyond the read that existed and was not read, with its reason; then the others. */
  unreadable: Unreadable[];
}

/**
 * Scans from the end of the prefix back to just past what was read for the deepest entry this request
 * could not read: live but outside every window (`beyond_lookback`), live but still being written
 * (`pending`), or expired (`expired`, with the entry's own TTL). Stops at the first it finds.
 */
export function deepestUnreadable(
  prefix: Prefix,
  store: EntryStore,
  scope: string,
  start: number,
  readBlock: number,
): Unreadable | undefined {
  const blocks = prefix.blocks;
  for (let i = blocks.length - 1; i > readBlock; i--) {
    const block = blocks[i];
    if (!block) continue;
    const key = `${scope}|${block.hash}`;
    const live = store.peek(key, start);
    if (live) {
      return live.readableAt > start
        ? { reason: 'pending', blockIndex: i, tokens: block.cumulativeTokens }
        : { reason: 'beyond_lookback', blockIndex: i, tokens: block.cumulativeTokens };
    }
    const gone = store.expired(key, start);
    if (gone)
      return {
        reason: 'expired',
        blockIndex: i,
        tokens: block.cumulativeTokens,
        ttlMs: gone.ttlMs,
        expiredAt: gone.expiresAt,
      };
  }
  return undefined;
}
