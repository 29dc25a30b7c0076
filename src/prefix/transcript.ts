// The transcript key: a running key over a conversation's messages alone (role and block identity, in order),
// blind to tools, system prompt (also when sent as leading system/developer messages), parameters and message
// shape. It says "this is the same conversation so far"; it never decides what the cache can read (block.hash).

import { hash } from 'node:crypto';
import { KeyChain } from './key-chain.js';

const SEED = hash('sha256', 'cacheward-transcript-v1', 'hex');
const roles = new Map<string, string>();
/** Roles whose leading messages are the system prompt (OpenAI Chat and Responses send it as messages). */
const PROMPT_ROLES: ReadonlySet<string> = new Set(['system', 'developer']);

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
 * The leading system/developer messages are the system prompt, not the conversation: they get no transcript
 * (undefined), so two conversations that share only a system prompt share no transcript key, and a system
 * prompt edited in place keeps the conversation's.
 */
export class TranscriptChain {
  private readonly chain = new KeyChain();
  private started = false;
  constructor() {
    this.chain.reset(SEED);
  }

  /** The chain's state after the last block fed, to resume from it (a shared history is not re-fed). */
  save(): readonly number[] {
    return [...this.chain.save(), this.started ? 1 : 0];
  }

  load(state: readonly number[]): void {
    this.chain.load(state.slice(0, -1));
    this.started = state[state.length - 1] === 1;
  }

  next(role: string | undefined, contentHash: string): string | undefined {
    if (!this.started && role !== undefined && PROMPT_ROLES.has(role)) return undefined;
    this.started = true;
    this.chain.absorb(roleId(role ?? ''));
    this.chain.absorb(contentHash);
    return this.chain.key();
  }
}
