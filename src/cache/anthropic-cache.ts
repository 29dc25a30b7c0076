// The Anthropic prompt-cache model: breakpoints, 20-block lookback, TTLs refreshed on read, minimums,
// writes readable once the writing response begins, A/B/C usage. Pure: time and scope are passed in.

import { drainSteps, STEP_ITEMS } from '../core/steps.js';
import type { Prefix } from '../prefix/build-prefix.js';
import { type AnthropicModelFacts, anthropicModelFacts } from './anthropic-models.js';
import {
  anthropicBreakpoints,
  type Breakpoint,
  type RuleViolation,
  TTL_1H,
  TTL_5M,
} from './anthropic-rules.js';
import { thinkingInContext } from './anthropic-thinking.js';
import { type CacheEvidence, type Unreadable, unreadableEntriesSteps } from './cache-evidence.js';
import { type CacheEntry, EntryStore, entrySnapshot } from './entry-store.js';

/** How many positions a breakpoint looks back, counting itself (prompt-caching.md). */
export const LOOKBACK_POSITIONS = 20;

/** The usage object the provider returns, cache fields included. */
export interface AnthropicCacheUsage {
  input_tokens: number;
  cache_creation_input_tokens: number;
  cache_read_input_tokens: number;
  cache_creation: { ephemeral_5m_input_tokens: number; ephemeral_1h_input_tokens: number };
}

/** What one request read and wrote, and why. */
export interface AnthropicCacheResult {
  usage: AnthropicCacheUsage;
  breakpoints: Breakpoint[];
  /** The longest hit: the block it ended at, its tokens, and how far back from its breakpoint it was found. */
  hit: { blockIndex: number; tokens: number; breakpointIndex: number; distance: number } | null;
  /**
   * Entries this request wrote, as they stood after it (copies: a later request's read or write does not
   * change them); readable once {@link AnthropicCache.responseBegan} is called with this result.
   */
  writes: CacheEntry[];
  /** Breakpoints not written because their prefix is below the model's minimum. */
  belowMinimum: Breakpoint[];
  minimumTokens: number;
  /** Live entries a breakpoint's window would have found, but that were still being written (parallel). */
  pendingMatches: number;
  /**
   * With `explain`: a live entry outside every breakpoint's lookback window (the docs' turn-3 case), which
   * the request could not read. Null otherwise.
   */
  beyondLookback: { blockIndex: number; tokens: number } | null;
  /** What could be read and why not more (always present; the scan runs only with `explain`). */
  evidence: CacheEvidence;
  /**
   * Thinking stripped from context on a model that does not keep it (anthropic-thinking.ts): the prefix
   * actually keyed and counted (block indices above refer to it), and what was stripped. Null otherwise.
   */
  thinkingStripped: { prefix: Prefix; blocks: number; tokens: number } | null;
}

/** Options for an {@link AnthropicCache}. */
export interface AnthropicCacheOptions {
  store?: EntryStore;
  /** Per model id: facts to override (minimum tokens, mid-conversation support). */
  modelOverrides?: Readonly<Record<string, Partial<AnthropicModelFacts>>>;
}

/** The cache of one simulated (or analyzed) Anthropic organization. Scope = API key and model. */
export class AnthropicCache {
  readonly store: EntryStore;
  /** The stored entries behind each result's copies, for {@link responseBegan} to make readable. */
  private readonly written = new WeakMap<object, CacheEntry[]>();
  private readonly overrides: AnthropicCacheOptions['modelOverrides'];

  constructor(options: AnthropicCacheOptions = {}) {
    this.store = options.store ?? new EntryStore();
    this.overrides = options.modelOverrides;
  }

  facts(model: string | undefined): AnthropicModelFacts {
    return anthropicModelFacts(model, this.overrides);
  }

  /**
   * Looks the request up and records its writes, at `start` (the request's start). `scope` separates
   * workspaces (a hash of the API key); the model is already part of every key. `writer` names the request.
   */
  evaluate(
    prefix: Prefix,
    scope: string,
    start: number,
    writer: string,
    options: { explain?: boolean } = {},
  ): AnthropicCacheResult | RuleViolation {
    return drainSteps(this.evaluateSteps(prefix, scope, start, writer, options));
  }

  /**
   * {@link evaluate} in bounded steps: the scans that explain a miss (every block of a long prefix looked
   * up) yield every {@link STEP_ITEMS} blocks. The same result, provided nothing else uses this cache
   * until the steps are done.
   */
  *evaluateSteps(
    prefix: Prefix,
    scope: string,
    start: number,
    writer: string,
    options: { explain?: boolean } = {},
  ): Generator<void, AnthropicCacheResult | RuleViolation> {
    // Older models strip earlier thinking from context: key and count what the model actually sees.
    const inContext = thinkingInContext(prefix, this.facts(prefix.model));
    prefix = inContext.prefix;
    const breakpoints = anthropicBreakpoints(prefix);
    if (!Array.isArray(breakpoints)) return breakpoints;
    this.store.sweep(start);
    const blocks = prefix.blocks;
    const keyAt = (i: number) => `${scope}|${blocks[i]?.hash}`;
    const minimum = this.facts(prefix.model).minCacheableTokens;

    let hit: AnthropicCacheResult['hit'] = null;
    let hitEntry: CacheEntry | undefined;
    let pendingMatches = 0;
    for (let k = breakpoints.length - 1; k >= 0; k--) {
      const bp = breakpoints[k] as Breakpoint;
      const lowest = Math.max(0, bp.blockIndex - LOOKBACK_POSITIONS + 1);
      for (let i = bp.blockIndex; i >= lowest; i--) {
        if (hit && i <= hit.blockIndex) break;
        // One key for both looks (each new string is flattened and hashed again by the map).
        const key = keyAt(i);
        const entry = this.store.lookup(key, start);
        if (entry) {
          hit = {
            blockIndex: i,
            tokens: blocks[i]?.cumulativeTokens ?? 0,
            breakpointIndex: bp.blockIndex,
            distance: bp.blockIndex - i,
          };
          hitEntry = entry;
          break;
        }
        if (this.store.peek(key, start)) pendingMatches++;
      }
    }
    if (hitEntry) this.store.touch(hitEntry, start);

    // An entry further back than every window: found only to explain a miss, never read.
    let beyondLookback: AnthropicCacheResult['beyondLookback'] = null;
    if (options.explain && breakpoints.length) {
      const firstWindowStart = Math.max(
        0,
        (breakpoints[0] as Breakpoint).blockIndex - LOOKBACK_POSITIONS + 1,
      );
      const from = hit ? hit.blockIndex : -1;
      let step = 0;
      for (let i = firstWindowStart - 1; i > from; i--) {
        if (++step % STEP_ITEMS === 0) yield;
        if (this.store.lookup(keyAt(i), start)) {
          beyondLookback = { blockIndex: i, tokens: blocks[i]?.cumulativeTokens ?? 0 };
          break;
        }
      }
      // Gaps between windows count too (a later breakpoint far from the one before it).
      if (!beyondLookback) {
        for (let k = breakpoints.length - 1; k > 0 && !beyondLookback; k--) {
          const hi = (breakpoints[k] as Breakpoint).blockIndex - LOOKBACK_POSITIONS;
          const lo = (breakpoints[k - 1] as Breakpoint).blockIndex;
          for (let i = hi; i > Math.max(lo, from); i--) {
            if (++step % STEP_ITEMS === 0) yield;
            if (this.store.lookup(keyAt(i), start)) {
              beyondLookback = { blockIndex: i, tokens: blocks[i]?.cumulativeTokens ?? 0 };
              break;
            }
          }
        }
      }
    }

    // What this request could not read, found before its own writes land (they are not "earlier").
    const unreadable: Unreadable[] = [];
    if (options.explain) {
      const found = yield* unreadableEntriesSteps(prefix, this.store, scope, start, hit?.blockIndex ?? -1);
      for (const u of found) {
        if (u.reason === 'beyond_lookback') {
          const bp = breakpoints.find((x) => x.blockIndex > u.blockIndex);
          if (bp) u.distance = bp.blockIndex - u.blockIndex + 1;
        }
        unreadable.push(u);
      }
    }
    if (options.explain && inContext.stripped)
      unreadable.push({
        reason: 'thinking_stripped',
        tokens: inContext.before,
        blocks: inContext.stripped,
        strippedTokens: inContext.strippedTokens,
      });
    const a = hit?.tokens ?? 0;
    const written: CacheEntry[] = [];
    const belowMinimum: Breakpoint[] = [];
    let b = a;
    let c = a;
    for (const bp of breakpoints) {
      if (hit && bp.blockIndex <= hit.blockIndex) continue;
      const tokens = blocks[bp.blockIndex]?.cumulativeTokens ?? 0;
      if (tokens < minimum) {
        belowMinimum.push(bp);
        continue;
      }
      written.push(
        this.store.write(keyAt(bp.blockIndex), tokens, bp.ttlMs, start, writer, Number.POSITIVE_INFINITY),
      );
      if (bp.ttlMs >= TTL_1H) b = Math.max(b, tokens);
      c = Math.max(c, tokens);
    }
    if (options.explain && belowMinimum.length && !written.length)
      unreadable.push({
        reason: 'below_minimum',
        tokens:
          blocks[(belowMinimum[belowMinimum.length - 1] as Breakpoint).blockIndex]?.cumulativeTokens ?? 0,
        minimum,
      });
    const longestTtl = breakpoints.reduce((m, bp) => Math.max(m, bp.ttlMs), 0);
    const writes = written.map(entrySnapshot);
    const result: AnthropicCacheResult = {
      evidence: {
        readTokens: a,
        cachedAfterTokens: c,
        writesReported: true,
        ttlMs: longestTtl || TTL_5M,
        unreadable,
      },
      usage: {
        input_tokens: prefix.totalTokens - c,
        cache_creation_input_tokens: c - a,
        cache_read_input_tokens: a,
        cache_creation: { ephemeral_5m_input_tokens: c - b, ephemeral_1h_input_tokens: b - a },
      },
      breakpoints,
      hit,
      writes,
      belowMinimum,
      minimumTokens: minimum,
      pendingMatches,
      beyondLookback,
      thinkingStripped: inContext.stripped
        ? { prefix, blocks: inContext.stripped, tokens: inContext.strippedTokens }
        : null,
    };
    if (written.length) this.written.set(result, written);
    return result;
  }

  /** The writing response has sent its first byte: what it wrote becomes readable from `at`. */
  responseBegan(result: AnthropicCacheResult, at: number): void {
    const written = this.written.get(result);
    if (written) this.store.markReadable(written, at);
    // The result's own copies say so too: this request's response began (another's later does not count).
    this.store.markReadable(result.writes, at);
  }
}
