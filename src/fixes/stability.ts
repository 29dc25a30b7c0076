// The stability invariant, one function for the proxy's live guard and the replay gate: a fixed request
// must not lose more of its parent's forwarded prefix than the client's own request loses of the parent's.
// Pure; it compares cumulative keys from the prefix model only.

import type { PrefixBlock } from '../prefix/build-prefix.js';
import { sharedPrefixTokens } from '../prefix/first-divergence.js';

/** The blocks of a request as the guard needs them (the prefix model's). */
export type KeyedBlocks = readonly Pick<PrefixBlock, 'hash' | 'cumulativeTokens'>[];

/** A parent's two prefixes: what its client sent and what went upstream. */
export interface ForwardedPair {
  client: KeyedBlocks;
  forwarded: KeyedBlocks;
}

/**
 * A pair as the guard keeps it for the requests after it: each block's key and cumulative tokens only (not
 * the prefix model's whole blocks, with their spans and tool parts), a block both sides share kept once.
 * Given its parent's kept pair (`base`), a block equal to the parent's at the same place is the parent's
 * object: a conversation's consecutive pairs hold their shared history once, not once per request.
 */
export function keyedPair(pair: ForwardedPair, base?: ForwardedPair): ForwardedPair {
  const keyed = (b: KeyedBlocks[number], i: number, from: KeyedBlocks | undefined) => {
    const had = from?.[i];
    return had && had.hash === b.hash && had.cumulativeTokens === b.cumulativeTokens
      ? had
      : { hash: b.hash, cumulativeTokens: b.cumulativeTokens };
  };
  const client = pair.client.map((b, i) => keyed(b, i, base?.client));
  const forwarded = pair.forwarded.map((b, i) =>
    pair.client[i] === b ? (client[i] as KeyedBlocks[number]) : keyed(b, i, base?.forwarded),
  );
  return { client, forwarded };
}

/** How much each side keeps and loses of the parent's prefix, and whether the fix lost more. */
export interface StabilityCheck {
  /** Tokens the client's request shares with the parent's client request, and the parent's tokens it loses. */
  clientShared: number;
  clientLost: number;
  /** The same for the forwarded request against the parent's forwarded request. */
  forwardedShared: number;
  forwardedLost: number;
  breaksEarlier: boolean;
}

const total = (blocks: KeyedBlocks) => blocks[blocks.length - 1]?.cumulativeTokens ?? 0;

/**
 * Compares a request (client and forwarded) with its parent's. Lost tokens, not shared ones, are compared:
 * the forwarded prefix may be smaller than the client's (deferred tools are not part of it).
 */
export function checkStability(parent: ForwardedPair, now: ForwardedPair): StabilityCheck {
  const clientShared = sharedPrefixTokens(parent.client, now.client);
  const forwardedShared = sharedPrefixTokens(parent.forwarded, now.forwarded);
  const clientLost = Math.max(0, total(parent.client) - clientShared);
  const forwardedLost = Math.max(0, total(parent.forwarded) - forwardedShared);
  return {
    clientShared,
    clientLost,
    forwardedShared,
    forwardedLost,
    breaksEarlier: forwardedLost > clientLost + 1,
  };
}
