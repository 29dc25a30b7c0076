// What every simulator route shares: the caches, the clock, ids, counters, faults and the reply script.
// One object per simulator; routes never keep state of their own.

import { hash, randomBytes } from 'node:crypto';
import { AnthropicCache } from '../cache/anthropic-cache.js';
import { AnthropicDiagnostics } from '../cache/anthropic-diagnostics.js';
import type { AnthropicModelFacts } from '../cache/anthropic-models.js';
import { EntryStore } from '../cache/entry-store.js';
import { OpenAICache, OpenAIDiagnosticsStore } from '../cache/openai-cache.js';
import type { AdvanceableClock } from '../core/clock.js';
import { PrefixBuilder } from '../prefix/build-prefix.js';
import type { Provider } from '../wire/provider-errors.js';
import type { FaultRate } from './faults.js';
import type { ReplyScript } from './reply-script.js';
import { ResponseStore } from './response-store.js';

/** Counters reported by `GET /_sim/stats`. */
export interface SimCounters {
  requests: number;
  /** Requests whose client left before their first byte: nothing they wrote became readable. */
  abandoned: number;
  errors: number;
  faults: number;
  cacheReads: number;
  cacheWrites: number;
  tokensRead: number;
  tokensWritten: number;
}

/** One provider's counters in `GET /_sim/stats` (beside its cache store's entry counts). */
export interface ProviderCounters {
  requests: number;
  cacheReads: number;
  cacheWrites: number;
  tokensRead: number;
  tokensWritten: number;
}

/** What one evaluated request read and wrote, for the counters. */
export interface CacheOutcome {
  hit: boolean;
  /** Cache entries written. */
  writes: number;
  tokensRead: number;
  tokensWritten: number;
}

const zeroProvider = (): ProviderCounters => ({
  requests: 0,
  cacheReads: 0,
  cacheWrites: 0,
  tokensRead: 0,
  tokensWritten: 0,
});

export interface SimContextOptions {
  clock: AdvanceableClock;
  requireApiKey: boolean;
  script: ReplyScript | undefined;
  faults: FaultRate[];
  /** Fault draws and ids from this seed; undefined: draws from 1, ids unique to this simulator. */
  seed: number | undefined;
  maxBodyBytes: number;
  maxEntries: number | undefined;
  anthropicModelOverrides: Readonly<Record<string, Partial<AnthropicModelFacts>>> | undefined;
  openaiOverflowPerMinute: number | undefined;
  streamChunkChars: number;
  /** The organization has Zero Data Retention: OpenAI's default retention is `in_memory`, not `24h`. */
  zdr: boolean;
}

export class SimContext {
  readonly anthropic: AnthropicCache;
  readonly openai: OpenAICache;
  readonly anthropicDiagnostics = new AnthropicDiagnostics();
  readonly openaiDiagnostics = new OpenAIDiagnosticsStore();
  readonly builder = new PrefixBuilder();
  readonly counters: SimCounters = {
    requests: 0,
    abandoned: 0,
    errors: 0,
    faults: 0,
    cacheReads: 0,
    cacheWrites: 0,
    tokensRead: 0,
    tokensWritten: 0,
  };
  readonly perProvider: Record<Provider, ProviderCounters> = {
    anthropic: zeroProvider(),
    openai: zeroProvider(),
  };
  /** Responses API: stored responses, the context a `previous_response_id` chain continues. */
  readonly responses = new ResponseStore();
  /** Responses API: how many assistant turns a stored response id stands for (for previous_response_id). */
  readonly responseTurns = new Map<string, number>();
  private sequence = 0;
  private rng: number;
  private readonly instance: string;

  constructor(readonly options: SimContextOptions) {
    const max = options.maxEntries === undefined ? {} : { maxEntries: options.maxEntries };
    this.anthropic = new AnthropicCache({
      store: new EntryStore(max),
      ...(options.anthropicModelOverrides ? { modelOverrides: options.anthropicModelOverrides } : {}),
    });
    this.openai = new OpenAICache({
      store: new EntryStore(max),
      ...(options.openaiOverflowPerMinute === undefined
        ? {}
        : { overflowPerMinute: options.openaiOverflowPerMinute }),
    });
    this.rng = (options.seed ?? 1) >>> 0 || 1;
    this.instance =
      options.seed === undefined
        ? randomBytes(3).toString('hex')
        : hash('sha256', `${options.seed}`, 'hex').slice(0, 6);
  }

  get clock(): AdvanceableClock {
    return this.options.clock;
  }

  /** A fresh id with the provider's prefix: `msg_`, `req_`, `chatcmpl-`, `resp_`, `toolu_`, `call_`. */
  id(prefix: string): string {
    this.sequence++;
    return `${prefix}sim${this.instance}${this.sequence.toString(36).padStart(8, '0')}`;
  }

  /** The cache scope of an API key: a hash, so the key itself is never kept. */
  scope(apiKey: string | undefined): string {
    return hash('sha256', `cacheward-sim-scope\n${apiKey ?? ''}`, 'hex').slice(0, 24);
  }

  /** A deterministic random number in [0, 1) (xorshift32), for fault rates. */
  random(): number {
    let x = this.rng;
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    this.rng = x >>> 0;
    return this.rng / 4294967296;
  }

  sleep(ms: number): Promise<void> {
    return ms > 0 ? new Promise((r) => setTimeout(r, ms)) : Promise.resolve();
  }

  /** Counts a request that reached a provider route. */
  countRequest(provider: Provider): void {
    this.counters.requests++;
    this.perProvider[provider].requests++;
  }

  /** Counts what an evaluated request read from and wrote to the provider's cache. */
  countCache(provider: Provider, o: CacheOutcome): void {
    for (const c of [this.counters, this.perProvider[provider]]) {
      c.cacheReads += o.hit ? 1 : 0;
      c.cacheWrites += o.writes;
      c.tokensRead += o.tokensRead;
      c.tokensWritten += o.tokensWritten;
    }
  }

  /** Empties every cache and zeroes every counter, the stores' and the providers' included. */
  reset(): void {
    this.anthropic.store.clear();
    this.openai.store.clear();
    for (const stats of [this.anthropic.store.stats, this.openai.store.stats]) {
      for (const k of Object.keys(stats) as Array<keyof typeof stats>) stats[k] = 0;
    }
    this.perProvider.anthropic = zeroProvider();
    this.perProvider.openai = zeroProvider();
    this.anthropicDiagnostics.clear();
    this.openaiDiagnostics.clear();
    this.responseTurns.clear();
    this.responses.clear();
    for (const k of Object.keys(this.counters) as Array<keyof SimCounters>) this.counters[k] = 0;
  }

  stats() {
    const a = this.anthropic.store;
    const o = this.openai.store;
    return {
      now: this.clock.now(),
      entries: a.size + o.size,
      anthropic: { entries: a.size, ...a.stats, ...this.perProvider.anthropic },
      openai: { entries: o.size, ...o.stats, ...this.perProvider.openai },
      ...this.counters,
    };
  }
}

/** Splits text into stream deltas of about `size` characters (never splitting a surrogate pair). */
export function chunkText(text: string, size: number): string[] {
  const out: string[] = [];
  const chars = Array.from(text);
  for (let i = 0; i < chars.length; i += size) out.push(chars.slice(i, i + size).join(''));
  return out.length ? out : [''];
}
