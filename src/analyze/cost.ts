// What a request cost and what a miss wasted, in dollars, from normalized usage and a dated price row.
// Pure arithmetic; an unpriced model is the caller's to flag, never a zero here.

import type { NormalizedUsage } from '../wire/usage.js';
import type { PriceRow } from './price-table.js';

export interface RequestCost {
  input: number;
  cacheWrite: number;
  cacheRead: number;
  output: number;
  total: number;
}

const M = 1_000_000;

/** The cost of one request's usage. OpenAI writes (GPT-5.6+ `cache_write_tokens`) are priced at `write5m`. */
export function costOf(u: NormalizedUsage, p: PriceRow): RequestCost {
  const input = (u.uncached * p.input) / M;
  const cacheWrite =
    (u.cacheWrite5m * p.write5m + u.cacheWrite1h * p.write1h) / M +
    (p.provider === 'openai' ? (u.cacheWrite * p.write5m) / M : 0);
  const cacheRead = (u.cacheRead * p.read) / M;
  const output = (u.output * p.output) / M;
  return { input, cacheWrite, cacheRead, output, total: input + cacheWrite + cacheRead + output };
}

/**
 * What `tokens` re-written cost beyond reading them: Anthropic at the write price of the TTL used, OpenAI
 * at the write price when the response reports writes (GPT-5.6+), else at the uncached input price.
 */
export function wasteOf(
  tokens: number,
  p: PriceRow,
  provider: string,
  oneHour: boolean,
  u: NormalizedUsage,
): number {
  let paid: number;
  if (provider === 'anthropic') paid = oneHour ? p.write1h : p.write5m;
  else paid = u.cacheWrite > 0 ? p.write5m : p.input;
  return (tokens * (paid - p.read)) / M;
}
