// What the Anthropic cache model needs to know per model: the minimum cacheable prefix, whether
// mid-conversation system messages and tool changes are supported, and whether earlier thinking blocks are
// kept in context (SPEC-caching.md). Data, no logic.

/** Facts about one model family, with the date they were read from shared/reference. */
export interface AnthropicModelFacts {
  family: string;
  /** Smallest prefix (tokens) a breakpoint caches; below it nothing is written, silently. */
  minCacheableTokens: number;
  /** `role: "system"` messages inside `messages` (and, with the beta, tool_addition / tool_removal). */
  midConversationSystem: boolean;
  /**
   * Earlier thinking blocks stay in context when a user turn adds non-tool-result content (Opus 4.5+,
   * Sonnet 4.6+). False: they are stripped, and cache entries holding them cannot be read (earlier Opus and
   * Sonnet, every Haiku; prompt-caching.md, "Caching with thinking blocks"). Model choice for the families
   * the docs do not name (Fable, Mythos, unknown models): kept, as on every current model.
   */
  keepsThinking: boolean;
}

/** As of 2026-08-21 (reference/anthropic/prompt-caching.md, mid-conversation-system-messages.md). */
const FAMILIES: ReadonlyArray<[prefix: string, facts: AnthropicModelFacts]> = [
  [
    'claude-opus-5',
    { family: 'Opus 5', minCacheableTokens: 512, midConversationSystem: true, keepsThinking: true },
  ],
  [
    'claude-fable-5',
    { family: 'Fable 5', minCacheableTokens: 512, midConversationSystem: true, keepsThinking: true },
  ],
  [
    'claude-mythos-5',
    { family: 'Mythos 5', minCacheableTokens: 512, midConversationSystem: true, keepsThinking: true },
  ],
  [
    'claude-mythos-preview',
    { family: 'Mythos Preview', minCacheableTokens: 2048, midConversationSystem: false, keepsThinking: true },
  ],
  [
    'claude-opus-4-8',
    { family: 'Opus 4.8', minCacheableTokens: 1024, midConversationSystem: true, keepsThinking: true },
  ],
  [
    'claude-opus-4-7',
    { family: 'Opus 4.7', minCacheableTokens: 2048, midConversationSystem: false, keepsThinking: true },
  ],
  [
    'claude-opus-4-6',
    { family: 'Opus 4.6', minCacheableTokens: 4096, midConversationSystem: false, keepsThinking: true },
  ],
  [
    'claude-opus-4-5',
    { family: 'Opus 4.5', minCacheableTokens: 4096, midConversationSystem: false, keepsThinking: true },
  ],
  [
    'claude-opus-4-1',
    { family: 'Opus 4.1', minCacheableTokens: 1024, midConversationSystem: false, keepsThinking: false },
  ],
  [
    'claude-opus-4',
    { family: 'Opus 4', minCacheableTokens: 1024, midConversationSystem: false, keepsThinking: false },
  ],
  [
    'claude-sonnet-5',
    { family: 'Sonnet 5', minCacheableTokens: 1024, midConversationSystem: false, keepsThinking: true },
  ],
  [
    'claude-sonnet-4-6',
    { family: 'Sonnet 4.6', minCacheableTokens: 1024, midConversationSystem: false, keepsThinking: true },
  ],
  [
    'claude-sonnet-4-5',
    { family: 'Sonnet 4.5', minCacheableTokens: 1024, midConversationSystem: false, keepsThinking: false },
  ],
  [
    'claude-sonnet-4',
    { family: 'Sonnet 4', minCacheableTokens: 1024, midConversationSystem: false, keepsThinking: false },
  ],
  [
    'claude-haiku-4-5',
    { family: 'Haiku 4.5', minCacheableTokens: 4096, midConversationSystem: false, keepsThinking: false },
  ],
  [
    'claude-3-5-haiku',
    { family: 'Haiku 3.5', minCacheableTokens: 2048, midConversationSystem: false, keepsThinking: false },
  ],
];

/** For a model the table does not know (model choice: 1,024 tokens, no mid-conversation features, thinking kept). */
export const UNKNOWN_MODEL: AnthropicModelFacts = {
  family: 'unknown',
  minCacheableTokens: 1024,
  midConversationSystem: false,
  keepsThinking: true,
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
