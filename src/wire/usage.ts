// Normalizes the usage objects of both providers into one shape, keeping the identities of SPEC-caching.md.
// Never invents numbers: a usage without cache fields is "not reported", not zero.

import type { Json } from '../core/json.js';
/** Provider usage in one shape. `cacheReported` is false when the provider said nothing about caching. */
export interface NormalizedUsage {
  /** All input tokens, cached or not. */
  inputTotal: number;
  /** Tokens read from the cache. */
  cacheRead: number;
  /** Tokens written to the cache, in total and by TTL where the provider says. */
  cacheWrite: number;
  cacheWrite5m: number;
  cacheWrite1h: number;
  /** Input tokens neither read nor written. */
  uncached: number;
  output: number;
  cacheReported: boolean;
}

const num = (v: unknown): number => (typeof v === 'number' && Number.isFinite(v) ? v : 0);
const obj = (v: unknown): Json | undefined =>
  v && typeof v === 'object' && !Array.isArray(v) ? (v as Json) : undefined;

/**
 * Anthropic: total = input_tokens + cache_creation_input_tokens + cache_read_input_tokens.
 * The 5m/1h split comes from `cache_creation`; when only the total is given it counts as 5m.
 */
export function normalizeAnthropicUsage(usage: unknown): NormalizedUsage | undefined {
  const u = obj(usage);
  if (!u) return undefined;
  const cacheReported = 'cache_read_input_tokens' in u || 'cache_creation_input_tokens' in u;
  const read = num(u.cache_read_input_tokens);
  const split = obj(u.cache_creation);
  const w1h = num(split?.ephemeral_1h_input_tokens);
  const w5mSplit = num(split?.ephemeral_5m_input_tokens);
  const write = 'cache_creation_input_tokens' in u ? num(u.cache_creation_input_tokens) : w1h + w5mSplit;
  const w5m = split ? w5mSplit : write;
  const uncached = num(u.input_tokens);
  return {
    inputTotal: uncached + write + read,
    cacheRead: read,
    cacheWrite: write,
    cacheWrite5m: w5m,
    cacheWrite1h: w1h,
    uncached,
    output: num(u.output_tokens),
    cacheReported,
  };
}

/**
 * OpenAI (Chat `prompt_tokens` or Responses `input_tokens`, both including cached tokens):
 * uncached = input − cached_tokens − cache_write_tokens (the last only on GPT-5.6+).
 */
export function normalizeOpenAIUsage(usage: unknown): NormalizedUsage | undefined {
  const u = obj(usage);
  if (!u) return undefined;
  const details = obj(u.prompt_tokens_details) ?? obj(u.input_tokens_details);
  const total = 'prompt_tokens' in u ? num(u.prompt_tokens) : num(u.input_tokens);
  const read = num(details?.cached_tokens);
  const write = num(details?.cache_write_tokens);
  return {
    inputTotal: total,
    cacheRead: read,
    cacheWrite: write,
    cacheWrite5m: 0,
    cacheWrite1h: 0,
    uncached: Math.max(0, total - read - write),
    output: 'completion_tokens' in u ? num(u.completion_tokens) : num(u.output_tokens),
    cacheReported: details !== undefined && 'cached_tokens' in details,
  };
}
