// The prefix a provider actually caches when it leaves some blocks out of the prompt (e.g. thinking blocks
// stripped on older models): the same blocks minus those, with keys and token sums derived as build does.
// Pure: it never changes the prefix it is given, and never chains keys another way than the builder.

import {
  foldLevel,
  LEVELS,
  messageStart,
  type Prefix,
  type PrefixBlock,
  type PrefixLevelInfo,
} from './build-prefix.js';
import { KeyChain } from './key-chain.js';
import { TranscriptChain } from './transcript.js';

/**
 * `prefix` without the blocks `drop` selects. Keys are re-chained exactly as the builder chains them (a
 * message's boundary goes with its first remaining block; a message left with no block loses its
 * boundary too), so the result's keys equal those of a body that never held the dropped blocks. Folded
 * parameters stay as they were. Returns `prefix` itself when nothing is dropped. Pure.
 */
export function dropBlocks(prefix: Prefix, drop: (block: PrefixBlock) => boolean): Prefix {
  const first = prefix.blocks.findIndex(drop);
  if (first < 0) return prefix;
  // The message boundary (role and header) of each message, from the units that carry it. A prefix
  // rebuilt from a capture has no units: its messages are taken to have no other fields (`{}`), which is
  // what nearly every message on the wire is.
  const starts = new Map<number, string>();
  for (const u of prefix.body.units) {
    if (u.level !== 'messages' || u.messageIndex === undefined) continue;
    if (u.messageHeader !== undefined && !starts.has(u.messageIndex))
      starts.set(u.messageIndex, messageStart(u.role ?? '', u.messageHeader));
  }
  if (!prefix.body.units.length) {
    for (const b of prefix.blocks) {
      if (
        b.level === 'messages' &&
        b.messageIndex !== undefined &&
        b.role !== undefined &&
        !starts.has(b.messageIndex)
      )
        starts.set(b.messageIndex, messageStart(b.role, '{}'));
    }
  }
  const blocks: PrefixBlock[] = [];
  const levels = {} as Record<(typeof LEVELS)[number], PrefixLevelInfo>;
  const chain = new KeyChain();
  let running = '';
  let tokens = 0;
  let changed = false;
  for (const level of LEVELS) {
    const info = prefix.levels[level];
    const foldHash = changed ? foldLevel(running, level, info.params) : info.foldHash;
    const start = blocks.length;
    let lastMessage: number | undefined;
    if (changed) chain.reset(foldHash);
    running = foldHash;
    for (let i = info.start; i < info.end; i++) {
      const b = prefix.blocks[i] as PrefixBlock;
      if (!changed && i === first) {
        changed = true;
        // Re-chain from the block before the first dropped one: replay this level's kept blocks so far.
        chain.reset(foldHash);
        lastMessage = undefined;
        for (const kept of blocks.slice(start)) lastMessage = absorb(chain, kept, lastMessage, starts);
      }
      if (changed && drop(b)) continue;
      if (changed) {
        lastMessage = absorb(chain, b, lastMessage, starts);
        running = chain.key();
        tokens += b.tokens;
        blocks.push({ ...b, index: blocks.length, hash: running, cumulativeTokens: tokens });
      } else {
        running = b.hash;
        tokens = b.cumulativeTokens;
        blocks.push(b);
      }
    }
    levels[level] = { start, end: blocks.length, params: info.params, foldHash };
  }
  // The transcript keys run over the messages alone: re-run them over the messages-level blocks kept.
  const transcript = new TranscriptChain();
  for (let i = levels.messages.start; i < levels.messages.end; i++) {
    const b = blocks[i] as PrefixBlock;
    const key = transcript.next(b.role, b.contentHash);
    if (b.transcript !== key)
      blocks[i] = b === prefix.blocks[i] ? { ...b, transcript: key } : Object.assign(b, { transcript: key });
  }
  return { ...prefix, blocks, levels, totalTokens: tokens };
}

/** Folds one block into the chain, with its message's boundary when it is the first block kept of it. */
function absorb(
  chain: KeyChain,
  b: PrefixBlock,
  lastMessage: number | undefined,
  starts: ReadonlyMap<number, string>,
): number | undefined {
  if (b.level === 'messages' && b.messageIndex !== undefined && b.messageIndex !== lastMessage) {
    // Responses items (function calls, reasoning, …) carry no boundary, as in the builder.
    const start = starts.get(b.messageIndex);
    if (start !== undefined) chain.absorb(start);
  }
  chain.absorb(b.contentHash);
  return b.level === 'messages' ? b.messageIndex : lastMessage;
}
