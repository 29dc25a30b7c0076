// The ends of a request's messages: where a conversation's requests meet. For each, the cumulative cache
// key (what the cache can share), the transcript key (which conversation this is) and the tokens so far.
// Read from the prefix model only; it never parses a body.

import { drainSteps, STEP_ITEMS } from '../core/steps.js';
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
  return drainSteps(messageEndsSteps(prefix));
}

/** {@link messageEnds} in bounded steps (it yields every {@link STEP_ITEMS} blocks it reads): the same ends. */
export function* messageEndsSteps(prefix: Prefix): Generator<void, MessageEnd[]> {
  const known = endsOf.get(prefix.blocks);
  if (known) return known.slice();
  // A prefix whose blocks begin with an earlier prefix's (the builder took them over) extends its ends.
  const taken = blocksTakenOver(prefix.blocks);
  const before = taken ? endsOf.get(taken.from) : undefined;
  const ends =
    before && taken
      ? yield* extendMessageEndsSteps(prefix, before.slice(), taken.count)
      : yield* extendMessageEndsSteps(prefix, [], 0);
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
  const { from, opening } = keptEnds(prefix, ends, shared);
  appendEnds(prefix, ends, from, prefix.levels.messages.end, opening);
  return ends;
}

/**
 * {@link extendMessageEnds} in bounded steps: the same plain loop over {@link STEP_ITEMS} blocks at a time,
 * yielding between, so a 100,000-message prefix is read over many turns of a caller's event loop. The same
 * ends, in the same array.
 */
export function* extendMessageEndsSteps(
  prefix: Prefix,
  ends: MessageEnd[],
  shared: number,
): Generator<void, MessageEnd[]> {
  const kept = keptEnds(prefix, ends, shared);
  let opening = kept.opening;
  const end = prefix.levels.messages.end;
  for (let i = kept.from; i < end; i += STEP_ITEMS) {
    opening = appendEnds(prefix, ends, i, Math.min(end, i + STEP_ITEMS), opening);
    if (i + STEP_ITEMS < end) yield;
  }
  return ends;
}

/** Cuts `ends` (in place) to those it can keep; returns the block to read on from and the opening flag there. */
function keptEnds(prefix: Prefix, ends: MessageEnd[], shared: number): { from: number; opening: boolean } {
  // The ends to keep (block and the next one shared) lead the list: found by bisection, not looked into.
  let kept = 0;
  let hi = ends.length;
  while (kept < hi) {
    const mid = (kept + hi) >>> 1;
    if ((ends[mid] as MessageEnd).block + 1 < shared) kept = mid + 1;
    else hi = mid;
  }
  ends.length = kept;
  const last = ends[kept - 1];
  return { from: last ? last.block + 1 : prefix.levels.messages.start, opening: last ? last.opening : true };
}

/** Appends the message ends among blocks `from` to `to` (of the messages level); returns the opening flag after them. */
function appendEnds(prefix: Prefix, out: MessageEnd[], from: number, to: number, opening: boolean): boolean {
  const end = prefix.levels.messages.end;
  const blocks = prefix.blocks;
  let open = opening;
  for (let i = from; i < to; i++) {
    const b = blocks[i];
    if (!b) continue;
    if (b.role === undefined || !INPUT_ROLES.has(b.role)) open = false;
    const next = blocks[i + 1];
    if (i + 1 < end && next?.messageIndex === b.messageIndex) continue;
    if (b.transcript === undefined) continue;
    out.push({
      block: i,
      message: b.messageIndex ?? 0,
      cacheKey: b.hash,
      transcript: b.transcript,
      tokens: b.cumulativeTokens,
      opening: open,
    });
  }
  return open;
}
