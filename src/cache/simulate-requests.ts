// The cache models as one plain function: given requests at their times, what each would have read and
// written. The analyzer runs it over captures; it never touches HTTP, files or a clock.

import type { Prefix } from '../prefix/build-prefix.js';
import { AnthropicCache, type AnthropicCacheOptions, type AnthropicCacheResult } from './anthropic-cache.js';
import type { RuleViolation } from './anthropic-rules.js';
import {
  OpenAICache,
  type OpenAICacheOptions,
  type OpenAICacheResult,
  type OpenAIRequestOptions,
} from './openai-cache.js';

/** One request as the models need it: its prefix, its scope (a workspace or key hash) and its times. */
export interface TimedRequest {
  prefix: Prefix;
  scope: string;
  /** When the request started (ms). */
  start: number;
  /** When its response's first byte went out (ms); its writes become readable then. Default: `start`. */
  firstByte?: number;
  /** OpenAI only: retention and breakpoint mode. */
  openai?: OpenAIRequestOptions;
}

export type SimulatedResult =
  | { provider: 'anthropic'; result: AnthropicCacheResult }
  | { provider: 'anthropic'; rejected: RuleViolation }
  | { provider: 'openai'; result: OpenAICacheResult };

export interface SimulateOptions {
  anthropic?: AnthropicCacheOptions;
  openai?: OpenAICacheOptions;
  /** Ask the Anthropic model to explain misses (entries beyond the lookback window). */
  explain?: boolean;
}

/**
 * Runs `requests` through fresh cache models in time order: each request looks up at its start, and its
 * writes become readable at its first byte (so requests that overlap both miss). Results come back in
 * the order given.
 */
export function simulateRequests(
  requests: readonly TimedRequest[],
  options: SimulateOptions = {},
): SimulatedResult[] {
  const anthropic = new AnthropicCache(options.anthropic);
  const openai = new OpenAICache(options.openai);
  type Event = { at: number; kind: 0 | 1; index: number };
  const events: Event[] = [];
  requests.forEach((r, index) => {
    events.push({ at: r.start, kind: 1, index });
    events.push({ at: r.firstByte ?? r.start, kind: 0, index });
  });
  // At equal times a response that began counts before a request that starts (readable at <= now).
  events.sort((a, b) => a.at - b.at || a.kind - b.kind || a.index - b.index);
  const results: SimulatedResult[] = new Array(requests.length);
  const started = new Set<number>();
  const pendingBegin = new Set<number>();
  const begin = (index: number, at: number) => {
    const r = results[index];
    if (!r || !('result' in r)) return;
    if (r.provider === 'anthropic') anthropic.responseBegan(r.result, at);
    else openai.responseBegan(r.result, at);
  };
  for (const e of events) {
    const req = requests[e.index] as TimedRequest;
    if (e.kind === 1) {
      started.add(e.index);
      if (req.prefix.format === 'anthropic-messages') {
        const out = anthropic.evaluate(req.prefix, req.scope, req.start, `r${e.index}`, {
          explain: options.explain ?? false,
        });
        results[e.index] =
          'usage' in out ? { provider: 'anthropic', result: out } : { provider: 'anthropic', rejected: out };
      } else {
        results[e.index] = {
          provider: 'openai',
          result: openai.evaluate(req.prefix, req.scope, req.start, `r${e.index}`, req.openai ?? {}),
        };
      }
      if (pendingBegin.delete(e.index)) begin(e.index, req.firstByte ?? req.start);
    } else if (started.has(e.index)) begin(e.index, e.at);
    else pendingBegin.add(e.index); // first byte stamped before start (clock skew): apply at start
  }
  return results;
}
