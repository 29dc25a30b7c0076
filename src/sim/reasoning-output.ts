// Reasoning items in simulated Responses output: their reasoning tokens, and `encrypted_content` when the
// request asked for it with `include: ["reasoning.encrypted_content"]`. Edits only the items it is given.

import type { Json } from '../core/json.js';
import {
  ENCRYPTED_REASONING_INCLUDE,
  encodeReasoning,
  reasoningTokens,
} from '../prefix/encrypted-reasoning.js';

/**
 * Adds `encrypted_content` to the reasoning items of `output` when `include` asks for it, and returns the
 * reasoning tokens of the turn (0 without thinking). Sent back as input, such an item counts as exactly
 * these tokens (the prefix model decodes them; src/prefix/encrypted-reasoning.ts).
 */
export function addEncryptedReasoning(
  output: Json[],
  include: unknown,
  thinking: string | undefined,
  responseId: string,
): number {
  if (thinking === undefined) return 0;
  const tokens = reasoningTokens(thinking);
  if (!Array.isArray(include) || !include.includes(ENCRYPTED_REASONING_INCLUDE)) return tokens;
  for (const item of output) {
    if (item.type === 'reasoning')
      item.encrypted_content = encodeReasoning(tokens, `${responseId}:${String(item.id)}`);
  }
  return tokens;
}
