// The transcript key: a running key over a conversation's messages alone (role and block identity, in order),
// blind to tools, system, parameters and message shape. It says "this is the same conversation so far".
// It never decides what the cache can read: that is the cumulative key's job (block.hash).

import { hash } from 'node:crypto';
import { KeyChain } from './key-chain.js';

const SEED = hash('sha256', 'cacheward-transcript-v1', 'hex');
const roles = new Map<string, string>();

function roleId(role: string): string {
  let h = roles.get(role);
  if (!h) {
    h = hash('sha256', `role\n${role}`, 'hex');
    if (roles.size < 1_000) roles.set(role, h);
  }
  return h;
}

/**
 * Feeds the messages-level blocks of one request in order; `next` returns the transcript key after each.
 * Message boundaries and string-vs-array content are not part of it, so a re-serialized history (a
 * reminder moved into its own message) keeps its transcript; an edited, inserted or removed block does not.
 */
export class TranscriptChain {
  private readonly chain = new KeyChain();
  constructor() {
    this.chain.reset(SEED);
  }

  /** The chain's state after the last block fed, to resume from it (a shared history is not re-fed). */
  save(): readonly number[] {
    return this.chain.save();
  }

  load(state: readonly number[]): void {
    this.chain.load(state);
  }

  next(role: string | undefined, contentHash: string): string {
    this.chain.absorb(roleId(role ?? ''));
    this.chain.absorb(contentHash);
    return this.chain.key();
  }
}
