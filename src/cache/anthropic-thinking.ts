// Thinking blocks on older models: once a user turn adds non-tool-result content, every earlier thinking
// block is stripped from context (prompt-caching.md, "Caching with thinking blocks"). Pure; never edits input.

import type { Prefix, PrefixBlock } from '../prefix/build-prefix.js';
import { dropBlocks } from '../prefix/drop-blocks.js';
import type { AnthropicModelFacts } from './anthropic-models.js';

const THINKING = new Set(['thinking', 'redacted_thinking']);

/** What the model actually sees of a request, and how much thinking was stripped to get it. */
export interface ThinkingInContext {
  /** The prefix the cache keys and counts: `prefix` itself when nothing was stripped. */
  prefix: Prefix;
  /** Thinking blocks stripped, and their estimated tokens (not in the prompt, not billed as input). */
  stripped: number;
  strippedTokens: number;
  /** Estimated tokens of the prefix before the first stripped block (0 when none was stripped). */
  before: number;
}

/**
 * On a model that does not keep thinking (`facts.keepsThinking` false: earlier Opus and Sonnet, every
 * Haiku), the thinking blocks before the last user content that is not a tool result are left out of the
 * prompt. A cache entry written while they were in it holds them, so it can no longer be read; entries
 * ending before the first of them still can. Thinking after that user content (the current tool loop) stays.
 */
export function thinkingInContext(prefix: Prefix, facts: AnthropicModelFacts): ThinkingInContext {
  if (facts.keepsThinking) return { prefix, stripped: 0, strippedTokens: 0, before: 0 };
  const m = prefix.levels.messages;
  let lastUserContent = -1;
  for (let i = m.end - 1; i >= m.start; i--) {
    const b = prefix.blocks[i] as PrefixBlock;
    if (b.role === 'user' && b.kind !== 'tool_result') {
      lastUserContent = i;
      break;
    }
  }
  let stripped = 0;
  let strippedTokens = 0;
  let before = 0;
  for (let i = m.start; i < lastUserContent; i++) {
    const b = prefix.blocks[i] as PrefixBlock;
    if (THINKING.has(b.kind)) {
      if (!stripped) before = b.cumulativeTokens - b.tokens;
      stripped++;
      strippedTokens += b.tokens;
    }
  }
  if (!stripped) return { prefix, stripped: 0, strippedTokens: 0, before: 0 };
  return {
    prefix: dropBlocks(prefix, (b) => b.index < lastUserContent && THINKING.has(b.kind)),
    stripped,
    strippedTokens,
    before,
  };
}
