// The `cacheward` entry point: the prefix model, request and stream parsers, and divergence analysis.
// Exports only what works today; later capabilities add their own entry points (sim, proxy, fork, guard).

export {
  type AnalysisResult,
  type AnalyzedRequest,
  type AnalyzeOptions,
  analyzeRecords,
  type BustCause,
  type Miss,
  type MissDetail,
  type SessionSummary,
} from './analyze/analyze-captures.js';
export { type CauseDecision, type CauseInput, decideCause } from './analyze/cause-table.js';
export { costOf, type RequestCost, wasteOf } from './analyze/cost.js';
export { describeMiss } from './analyze/describe-miss.js';
export { BUILT_IN_PRICES, type PriceRow, PriceTable, parsePriceRows } from './analyze/price-table.js';
export {
  AnthropicCache,
  type AnthropicCacheOptions,
  type AnthropicCacheResult,
  type AnthropicCacheUsage,
  LOOKBACK_POSITIONS,
} from './cache/anthropic-cache.js';
export {
  AnthropicDiagnostics,
  type AnthropicMissReason,
  CACHE_DIAGNOSIS_BETA,
} from './cache/anthropic-diagnostics.js';
export { type AnthropicModelFacts, anthropicModelFacts, UNKNOWN_MODEL } from './cache/anthropic-models.js';
export {
  anthropicBreakpoints,
  type Breakpoint,
  checkAnthropicRequest,
  MID_CONVERSATION_TOOL_CHANGES_BETA,
  type RuleViolation,
  TTL_1H,
  TTL_5M,
} from './cache/anthropic-rules.js';
export { type ThinkingInContext, thinkingInContext } from './cache/anthropic-thinking.js';
export type { CacheEvidence, Unreadable } from './cache/cache-evidence.js';
export { type CacheEntry, EntryStore, type EntryStoreOptions } from './cache/entry-store.js';
export {
  breakpointPlan,
  OpenAICache,
  type OpenAICacheOptions,
  type OpenAICacheResult,
  type OpenAIDiagnostics,
  OpenAIDiagnosticsStore,
  type OpenAIModelFacts,
  openaiModelFacts,
} from './cache/openai-cache.js';
export {
  type OpenAIRetention,
  openaiDefaultRetention,
  openaiHasDiagnostics,
  openaiRetentions,
  resolveOpenAIRetention,
  retentionTtlMs,
} from './cache/openai-rules.js';
export {
  type SimulatedResult,
  type SimulateOptions,
  simulateRequests,
  type TimedRequest,
} from './cache/simulate-requests.js';
export {
  type ConversationInfo,
  type ConversationRequest,
  type ConversationStore,
  commitConversation,
  MemoryConversationStore,
  type Reclassified,
  type Relation,
  type RequestNode,
  type Resolution,
  resolveConversation,
  type SessionLabel,
  sessionLabel,
} from './conversation/index.js';
export { type AdvanceableClock, type Clock, OffsetClock, VirtualClock } from './core/clock.js';
export {
  CachewardError,
  type ErrorCode,
  JsonDepthError,
  JsonSyntaxError,
  StreamFormatError,
  type TextPosition,
  WireFormatError,
} from './core/errors.js';
export { type Logger, lineLogger } from './core/logger.js';
export { BILLING_HEADER_PREFIX, billingHeaderUnit } from './prefix/billing-header.js';
export {
  LEVELS,
  type Prefix,
  type PrefixBlock,
  PrefixBuilder,
  type PrefixBuilderOptions,
  type PrefixLevel,
  type PrefixLevelInfo,
  parsePrefix,
} from './prefix/build-prefix.js';
export {
  type ChainedPrefix,
  type ContextBlock,
  chainBlocks,
  chainedBody,
  chainPrefix,
  contextBlocks,
  inputFragment,
  itemBlocks,
  type OpaquePart,
  opaqueBlocks,
  opaqueItem,
  outputFragment,
} from './prefix/chained-prefix.js';
export { describeComparison, describeDivergence } from './prefix/describe-divergence.js';
export { dropBlocks } from './prefix/drop-blocks.js';
export {
  type BlocksChange,
  comparePrefixes,
  type Divergence,
  firstDivergence,
  type ParamChange,
  type ParamsChange,
  type PrefixChange,
  type PrefixComparison,
  type ToolsChange,
} from './prefix/first-divergence.js';
export { type MessageEnd, messageEnds } from './prefix/message-ends.js';
export { stableJson } from './prefix/stable-json.js';
export {
  defaultTokenEstimator,
  type EstimatorInput,
  IMAGE_TOKENS,
  type TokenEstimator,
} from './prefix/token-estimate.js';
export type { CacheMarker } from './prefix/unit-info.js';
export { ANALYSIS_HEAP_FLAGS, tuneHeapForAnalysis } from './report/analysis-heap.js';
export { type AnalyzePathsOptions, analyzePaths } from './report/analyze-paths.js';
export { renderHtmlReport } from './report/html-report.js';
export { loadPriceFile } from './report/price-file.js';
export { renderTerminalReport } from './report/terminal-report.js';
export {
  type ByteSpan,
  detectFormat,
  formatFromRoute,
  type ParseRequestOptions,
  parseRequestBody,
  type RawUnit,
  type RequestBody,
  type WireFormat,
} from './wire/request-body.js';
export {
  createStreamReader,
  parseStream,
  type StreamEvent,
  type StreamReader,
  type StreamSummary,
} from './wire/sse-stream.js';
export { type NormalizedUsage, normalizeAnthropicUsage, normalizeOpenAIUsage } from './wire/usage.js';
