// The ends of a request's messages: where a conversation's requests meet. For each, the cumulative cache
// key (what the cache can share), the transcript key (which conversation this is) and the tokens so far.
// Read from the prefix model only; it never parses a body.

import { blocksTakenOver, type Prefix, type PrefixBlock } from './build-prefix.js';

/** One message end of a prefix. */
export interface MessageEnd {
  /** The index of the message's last block in the prefix. */
  block: number;
  message: number;
  cacheKey: string;
  transcript: string;
  /** Estimated tokens of the prefix up to and including this message. */
  tokens: number;
  /**
   * Every message up to this one is user input (or system prompt): no reply or tool call yet. Strangers
   * share such an opening (a context block, a template, Codex's environment and AGENTS.md messages).
   */
  opening: boolean;
}

/** Roles that are input to the model rather than its side of the conversation. */
const INPUT_ROLES: ReadonlySet<string> = new Set(['user', 'system', 'developer']);

/**
 * Every message end of `prefix`, in order, after the leading system/developer messages (the system prompt,
 * which has no transcript). Empty when the request has no conversation messages.
 */
export function messageEnds(prefix: Prefix): MessageEnd[] {
  const known = endsOf.get(prefix.blocks);
  if (known) return known.slice();
  // A prefix whose blocks begin with an earlier prefix's (the builder took them over) extends its ends.
  const taken = blocksTakenOver(prefix.blocks);
  const before = taken ? endsOf.get(taken.from) : undefined;
  const ends =
    before && taken
      ? extendMessageEnds(prefix, before.slice(), taken.count)
      : extendMessageEnds(prefix, [], 0);
  endsOf.set(prefix.blocks, ends);
  return ends.slice();
}

/** Each prefix's message ends, by its block list (weak: they go with the prefix). Never handed out itself. */
const endsOf = new WeakMap<readonly PrefixBlock[], MessageEnd[]>();

/**
 * {@link messageEnds} of `prefix`, given `ends`, the message ends of an earlier prefix whose first `shared`
 * blocks are this one's (the same blocks): the ends it can keep (their block and the next one both shared)
 * stay, the rest are found again. `ends` is cut and extended in place and returned, so a request that adds
 * a turn costs O(the new turn): pass an array nobody else reads afterwards.
 */
export function extendMessageEnds(prefix: Prefix, ends: MessageEnd[], shared: number): MessageEnd[] {
  const out = ends;
  // The ends to keep (block and the next one shared) lead the list: found by bisection, not looked into.
  let kept = 0;
  let hi = out.length;
  while (kept < hi) {
    const mid = (kept + hi) >>> 1;
    if ((out[mid] as MessageEnd).block + 1 < shared) kept = mid + 1;
    else hi = mid;
  }
  out.length = kept;
  const { start, end } = prefix.levels.messages;
  const blocks = prefix.blocks;
  const last = out[kept - 1];
  let opening = last ? last.opening : true;
  for (let i = last ? last.block + 1 : start; i < end; i++) {
    const b = blocks[i];
    if (!b) continue;
    if (b.role === undefined || !INPUT_ROLES.has(b.role)) opening = false;
    const next = blocks[i + 1];
    if (i + 1 < end && next?.messageIndex === b.messageIndex) continue;
    if (b.transcript === undefined) continue;
    out.push({
      block: i,
      message: b.messageIndex ?? 0,
      cacheKey: b.hash,
      transcript: b.transcript,
      tokens: b.cumulativeTokens,
      opening,
    });
  }
  return out;
}
