// The ends of a request's messages: where a conversation's requests meet. For each, the cumulative cache
// key (what the cache can share), the transcript key (which conversation this is) and the tokens so far.
// Read from the prefix model only; it never parses a body.

import type { Prefix } from './build-prefix.js';

/** One message end of a prefix. */
export interface MessageEnd {
  /** The index of the message's last block in the prefix. */
  block: number;
  message: number;
  cacheKey: string;
  transcript: string;
  /** Estimated tokens of the prefix up to and including this message. */
  tokens: number;
}

/**
 * Every message end of `prefix`, in order, after the leading system/developer messages (the system prompt,
 * which has no transcript). Empty when the request has no conversation messages.
 */
export function messageEnds(prefix: Prefix): MessageEnd[] {
  const out: MessageEnd[] = [];
  const { start, end } = prefix.levels.messages;
  const blocks = prefix.blocks;
  for (let i = start; i < end; i++) {
    const b = blocks[i];
    if (!b) continue;
    const next = blocks[i + 1];
    if (i + 1 < end && next?.messageIndex === b.messageIndex) continue;
    if (b.transcript === undefined) continue;
    out.push({
      block: i,
      message: b.messageIndex ?? 0,
      cacheKey: b.hash,
      transcript: b.transcript,
      tokens: b.cumulativeTokens,
    });
  }
  return out;
}
