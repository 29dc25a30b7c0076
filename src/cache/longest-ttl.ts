// How long anything about a conversation can matter to a provider's cache: the longest lifetime that
// provider's cache model gives an entry (Anthropic 1 h, OpenAI 24 h retention). Pure constants, no guessing here.

import type { WireFormat } from '../wire/request-body.js';
import { TTL_1H } from './anthropic-rules.js';
import { OPENAI_TTL_24H } from './openai-cache.js';

/** The longest cache lifetime of `format`'s provider, in ms; unknown formats get the longest of all. */
export function longestCacheTtlMs(format: WireFormat | undefined): number {
  if (format === 'anthropic-messages') return TTL_1H;
  return OPENAI_TTL_24H;
}
