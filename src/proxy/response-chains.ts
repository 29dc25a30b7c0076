// The proxy's memory of Responses `previous_response_id` chains: per response id, the identities (never text)
// of the context a request chained on it continues. Bounded, in memory only; it never touches traffic.
//
// A chained request is made whole before the conversation model and the capture see it: its prefix is the
// previous request's, then that response's output items, then its own input (prefix/chained-prefix). What
// the proxy did not see (a restart, another proxy of a fleet) is an opaque block named by the response id.

import { LruMap } from '../core/lru-map.js';
import { type Prefix, PrefixBuilder } from '../prefix/build-prefix.js';
import {
  type ChainedPrefix,
  type ContextBlock,
  chainBlocks,
  contextBlocks,
  itemBlocks,
  opaqueBlocks,
  outputFragment,
} from '../prefix/chained-prefix.js';

/** How much of a chained request's context the proxy knew (the capture record's `chain.context`). */
export type ChainKnowledge = 'known' | 'output_unknown' | 'unknown';

/** A chained request made whole, and how. */
export interface WholeRequest {
  prefix: Prefix;
  /** Set for a chained request: the response it continues and how much of that the proxy knew. */
  chain?: { previous: string; context: ChainKnowledge };
  /** What a request chained on this one's response continues (before that response's output). */
  context?: ContextBlock[];
}

/**
 * A builder for one parse of output items: a kept builder would hold the last body it read (their text),
 * and the request builder's memo is for request bodies.
 */
const scratch = () => new PrefixBuilder();

const RANK: Record<ChainKnowledge, number> = { known: 0, output_unknown: 1, unknown: 2 };

interface Remembered {
  context: ContextBlock[];
  /** The least it knew of any part (an opaque block anywhere in it). */
  knowledge: ChainKnowledge;
}

export interface ResponseChainsOptions {
  /** At most this many responses remembered (least recently used go first). Default 10,000. */
  maxResponses?: number;
  /** At most this many context blocks held in all. Default 2,000,000. */
  maxBlocks?: number;
}

export class ResponseChains {
  private readonly responses: LruMap<Remembered>;
  private readonly maxBlocks: number;
  private blocks = 0;
  private readonly made = new WeakMap<Prefix, WholeRequest>();

  constructor(options: ResponseChainsOptions = {}) {
    // What the cap pushes out no longer counts (a recount of every response held, on each response once
    // the cap was reached, cost O(responses) an exchange).
    this.responses = new LruMap(options.maxResponses ?? 10_000, (_, r) => {
      this.blocks -= r.context.length;
    });
    this.maxBlocks = options.maxBlocks ?? 2_000_000;
  }

  /**
   * The prefix the cache sees for `prefix`: the prefix itself unless it is a Responses request with
   * `previous_response_id`. `inputTokens` (the usage's whole input, once known) sizes the opaque block that
   * stands for a context the proxy never saw. Calling it again on its result returns that result.
   */
  whole(prefix: Prefix, inputTokens?: number): WholeRequest {
    const done = this.made.get(prefix);
    // Recomputed only to size a context it never saw from usage that has since come.
    if (done && (done.prefix === prefix || inputTokens === undefined || done.chain?.context !== 'unknown'))
      return done;
    const id = prefix.body.fields.previous_response_id;
    if (prefix.format !== 'openai-responses' || typeof id !== 'string' || !id) return { prefix };
    const seen = this.responses.get(id);
    let chained: ChainedPrefix;
    if (seen) chained = chainBlocks(prefix, seen.context);
    else {
      const rest = chainBlocks(prefix, []).prefix.totalTokens;
      const size = inputTokens !== undefined ? Math.max(0, inputTokens - rest) : 0;
      chained = chainBlocks(prefix, opaqueBlocks(scratch(), id, 'context', size));
    }
    const out: WholeRequest = {
      prefix: chained.prefix,
      chain: { previous: id, context: seen?.knowledge ?? 'unknown' },
      context: chained.context,
    };
    this.made.set(prefix, out);
    this.made.set(chained.prefix, out);
    return out;
  }

  /**
   * Remembers response `responseId` of a Responses request (its whole prefix from {@link whole}): its
   * output items when the response carried them, else an opaque block sized by `outputTokens`. A request
   * sent with `store: false` cannot be chained on and is not kept, unless it came over a WebSocket
   * (`connectionLocal`), whose latest response is chainable on that socket whatever `store` says.
   */
  remember(
    request: Prefix,
    responseId: string,
    output: readonly unknown[] | undefined,
    outputTokens: number | undefined,
    connectionLocal = false,
  ): void {
    if (request.format !== 'openai-responses') return;
    if (request.body.fields.store === false && !connectionLocal) return;
    const whole = this.whole(request);
    const before = whole.context ?? contextBlocks(whole.prefix);
    const tail = output
      ? itemBlocks(scratch(), [outputFragment(output)])
      : opaqueBlocks(scratch(), responseId, 'output', outputTokens ?? 0);
    const mine: ChainKnowledge = output ? 'known' : 'output_unknown';
    const earlier = whole.chain?.context ?? 'known';
    const knowledge = RANK[earlier] >= RANK[mine] ? earlier : mine;
    const context = [...before, ...tail];
    const old = this.responses.get(responseId);
    if (old) this.blocks -= old.context.length;
    this.responses.set(responseId, { context, knowledge });
    this.blocks += context.length;
    this.trim(responseId);
  }

  /** Drops the oldest responses while more blocks are held than allowed (the newest always stays). */
  private trim(newest: string): void {
    while (this.blocks > this.maxBlocks) {
      const oldest = this.responses.first();
      if (!oldest || oldest[0] === newest) break;
      this.responses.delete(oldest[0]);
      this.blocks -= oldest[1].context.length;
    }
  }

  /** How many responses and context blocks are held (health, bounds tests). */
  sizes(): { responses: number; blocks: number } {
    return { responses: this.responses.size, blocks: this.blocks };
  }
}
