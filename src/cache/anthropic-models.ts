// What the Anthropic cache model needs to know per model: the minimum cacheable prefix and whether
// mid-conversation system messages and tool changes are supported (SPEC-caching.md). Data, no logic.

/** Facts about one model family, with the date they were read from shared/reference. */
export interface AnthropicModelFacts {
  family: string;
  /** Smallest prefix (tokens) a breakpoint caches; below it nothing is written, silently. */
  minCacheableTokens: number;
  /** `role: "system"` messages inside `messages` (and, with the beta, tool_addition / tool_removal). */
  midConversationSystem: boolean;
}

/** As of 2026-08-21 (reference/anthropic/prompt-caching.md, mid-conversation-system-messages.md). */
const FAMILIES: ReadonlyArray<[prefix: string, facts: AnthropicModelFacts]> = [
  ['claude-opus-5', { family: 'Opus 5', minCacheableTokens: 512, midConversationSystem: true }],
  ['claude-fable-5', { family: 'Fable 5', minCacheableTokens: 512, midConversationSystem: true }],
  ['claude-mythos-5', { family: 'Mythos 5', minCacheableTokens: 512, midConversationSystem: true }],
  [
    'claude-mythos-preview',
    { family: 'Mythos Preview', minCacheableTokens: 2048, midConversationSystem: false },
  ],
  ['claude-opus-4-8', { family: 'Opus 4.8', minCacheableTokens: 1024, midConversationSystem: true }],
  ['claude-opus-4-7', { family: 'Opus 4.7', minCacheableTokens: 2048, midConversationSystem: false }],
  ['claude-opus-4-6', { family: 'Opus 4.6', minCacheableTokens: 4096, midConversationSystem: false }],
  ['claude-opus-4-5', { family: 'Opus 4.5', minCacheableTokens: 4096, midConversationSystem: false }],
  ['claude-opus-4-1', { family: 'Opus 4.1', minCacheableTokens: 1024, midConversationSystem: false }],
  ['claude-opus-4', { family: 'Opus 4', minCacheableTokens: 1024, midConversationSystem: false }],
  ['claude-sonnet-5', { family: 'Sonnet 5', minCacheableTokens: 1024, midConversationSystem: false }],
  ['claude-sonnet-4-6', { family: 'Sonnet 4.6', minCacheableTokens: 1024, midConversationSystem: false }],
  ['claude-sonnet-4-5', { family: 'Sonnet 4.5', minCacheableTokens: 1024, midConversationSystem: false }],
  ['claude-sonnet-4', { family: 'Sonnet 4', minCacheableTokens: 1024, midConversationSystem: false }],
  ['claude-haiku-4-5', { family: 'Haiku 4.5', minCacheableTokens: 4096, midConversationSystem: false }],
  ['claude-3-5-haiku', { family: 'Haiku 3.5', minCacheableTokens: 2048, midConversationSystem: false }],
];

/** For a model the table does not know (model choice: 1,024 tokens, no mid-conversation features). */
export const UNKNOWN_MODEL: AnthropicModelFacts = {
  family: 'unknown',
  minCacheableTokens: 1024,
  midConversationSystem: false,
};

/** The facts for a model id (`claude-opus-4-5-20251101` matches Opus 4.5); `overrides` win. */
export function anthropicModelFacts(
  model: string | undefined,
  overrides?: Readonly<Record<string, Partial<AnthropicModelFacts>>>,
): AnthropicModelFacts {
  const id = (model ?? '').toLowerCase();
  let facts = UNKNOWN_MODEL;
  for (const [prefix, f] of FAMILIES) {
    if (
      id === prefix ||
      id.startsWith(`${prefix}-`) ||
      id.startsWith(`${prefix}.`) ||
      id.startsWith(`${prefix}@`)
    ) {
      facts = f;
      break;
    }
  }
  const o = overrides?.[id];
  return o ? { ...facts, ...o } : facts;
}
