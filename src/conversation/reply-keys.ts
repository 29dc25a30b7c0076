// Which earlier requests' replies a request carries: the key of each of its latest messages that a reply
// (the model's side) follows, and of its own last message. Built from the prefix model's block identities
// and roles only; it never reads a body. Thinking is left out: a client may drop it from older replies.

import { hash } from 'node:crypto';
import type { Prefix, PrefixBlock } from '../prefix/build-prefix.js';
import { KeyChain } from '../prefix/key-chain.js';
import type { MessageEnd } from '../prefix/message-ends.js';

/** A message of the request that a reply follows: the index of its end in the request's ends, and its key. */
export interface ReplyAnchor {
  end: number;
  key: string;
}

/** How many of a request's latest replies are looked at: a resume re-sends the history, the reply is near its end. */
export const MAX_ANCHORS = 64;

const SEED = hash('sha256', 'cacheward-reply-v1', 'hex');
const THINKING: ReadonlySet<string> = new Set(['thinking', 'redacted_thinking']);
const roleIds = new Map<string, string>();

function roleId(role: string): string {
  let h = roleIds.get(role);
  if (!h) {
    h = hash('sha256', `reply-role\n${role}`, 'hex');
    if (roleIds.size < 1_000) roleIds.set(role, h);
  }
  return h;
}

/** The model's side of a conversation: an assistant message, or a Responses item it produced (a call, reasoning). */
function fromModel(b: PrefixBlock | undefined): boolean {
  if (!b) return false;
  if (b.role !== undefined) return b.role === 'assistant';
  return !b.kind.endsWith('_output') && b.kind !== 'message' && b.kind !== 'item_reference';
}

const chain = new KeyChain();

/** The key of the message whose last block is `last`: its role and its blocks' identities, thinking left out. */
function messageKey(blocks: readonly PrefixBlock[], last: number, from: number): string {
  const message = blocks[last]?.messageIndex;
  let first = last;
  while (first > from && blocks[first - 1]?.messageIndex === message) first--;
  chain.reset(SEED);
  chain.absorb(roleId(blocks[last]?.role ?? ''));
  for (let i = first; i <= last; i++) {
    const b = blocks[i] as PrefixBlock;
    if (!THINKING.has(b.kind)) chain.absorb(b.contentHash);
  }
  return `reply:${chain.key()}`;
}

/** The key of the request's own last message: what the reply to it follows in the requests that carry it. */
export function lastMessageKey(prefix: Prefix, ends: readonly MessageEnd[]): string | undefined {
  const last = ends[ends.length - 1];
  return last ? messageKey(prefix.blocks, last.block, prefix.levels.messages.start) : undefined;
}

/**
 * The request's messages after its end `after` that a reply follows, latest first, at most
 * {@link MAX_ANCHORS}: a request carries the reply of the earlier request whose last message has one of
 * these keys.
 */
export function replyAnchors(prefix: Prefix, ends: readonly MessageEnd[], after = -1): ReplyAnchor[] {
  const blocks = prefix.blocks;
  const from = prefix.levels.messages.start;
  const out: ReplyAnchor[] = [];
  for (let i = ends.length - 2; i > after && out.length < MAX_ANCHORS; i--) {
    const e = ends[i] as MessageEnd;
    if (fromModel(blocks[e.block + 1])) out.push({ end: i, key: messageKey(blocks, e.block, from) });
  }
  return out;
}

/** A request's reply anchors, read from its prefix the first time the resolver asks (most never do). */
export function lazyAnchors(
  prefix: Prefix,
  ends: readonly MessageEnd[],
): (after: number) => readonly ReplyAnchor[] {
  let known: { after: number; anchors: readonly ReplyAnchor[] } | undefined;
  return (after) => {
    if (known?.after !== after) known = { after, anchors: replyAnchors(prefix, ends, after) };
    return known.anchors;
  };
}
