// The `cacheward/internal` entry point: the parts of the models behind the public entry points, for benches,
// tools and the curious. Unstable: any release may change or remove any name here; never build on it lightly.

export type { AnalyzerBounds, PriceUsed, UnfixedCost, WarmFrom } from './analyze/analyze-captures.js';
export { type CauseDecision, type CauseInput, decideCause } from './analyze/cause-table.js';
export { costOf, type RequestCost, wasteOf } from './analyze/cost.js';
export { BUILT_IN_PRICES, type PriceMatch, parsePriceRows } from './analyze/price-table.js';
export type { UnrecordedBreak } from './analyze/unrecorded-break.js';
export {
  AnthropicCache,
  type AnthropicCacheOptions,
  type AnthropicCacheResult,
  type AnthropicCacheUsage,
  LOOKBACK_POSITIONS,
} from './cache/anthropic-cache.js';
export {
  AnthropicDiagnostics,
  type AnthropicDiagnosticsOptions,
  type AnthropicMissReason,
  CACHE_DIAGNOSIS_BETA,
} from './cache/anthropic-diagnostics.js';
export { type AnthropicModelFacts, anthropicModelFacts, UNKNOWN_MODEL } from './cache/anthropic-models.js';
export {
  type AnthropicCheckOptions,
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
  type OpenAIRequestOptions,
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
export { captureFiles } from './capture/capture-reader.js';
export {
  type CapturedBodies,
  type CaptureState,
  CaptureWriter,
  type CaptureWriterOptions,
} from './capture/capture-writer.js';
export type { NotCapturedMarker } from './capture/not-captured.js';
export type {
  ConversationSnapshot,
  MemoryConversationStoreOptions,
  PassingEntry,
} from './conversation/conversation-store.js';
export type { CapturedConversation } from './conversation/conversation-tracker.js';
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
export type { ReplyAnchor } from './conversation/reply-keys.js';
export type { WarmSource } from './conversation/resolve-conversation.js';
export type { HeaderLookup, LabelSource } from './conversation/session-label.js';
export {
  JsonDepthError,
  JsonSyntaxError,
  StreamFormatError,
  type TextPosition,
  WireFormatError,
} from './core/errors.js';
export type { Json } from './core/json.js';
export type { BytePatch, ClientEdit } from './fixes/byte-patch.js';
export { type PipelineResult, runFixes } from './fixes/fix.js';
export { type FixStageInput, type FixStageResult, runFixStage } from './fixes/fix-stage.js';
export type { PinState } from './fixes/pin-reminders.js';
export {
  checkStability,
  type ForwardedPair,
  type KeyedBlocks,
  type StabilityCheck,
} from './fixes/stability.js';
export type { FreezeState } from './fixes/tools-freeze.js';
export { BILLING_HEADER_PREFIX, billingHeaderUnit } from './prefix/billing-header.js';
export { LEVELS, parsePrefix } from './prefix/build-prefix.js';
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
export { describeDivergence } from './prefix/describe-divergence.js';
export { dropBlocks } from './prefix/drop-blocks.js';
export { type MessageEnd, messageEnds } from './prefix/message-ends.js';
export { stableJson } from './prefix/stable-json.js';
export {
  defaultTokenEstimator,
  type EstimatorInput,
  IMAGE_TOKENS,
  type TokenEstimator,
} from './prefix/token-estimate.js';
export {
  type CacheMarker,
  type ToolParts,
  type UnitInfo,
  UnitReader,
  type UnitReaderOptions,
} from './prefix/unit-info.js';
export { type LiveAnalysisOptions, liveLogLine } from './proxy/live-analysis.js';
export { LocalCa, type LocalCaOptions } from './proxy/local-ca.js';
export type { ProcessMemory } from './proxy/memory-release.js';
export { PROXY_HEAP_FLAGS } from './proxy/proxy-heap.js';
export type { CapturedBlock, CapturedPrefix, StoredBody, UnrecordedPart } from './record/capture-record.js';
export {
  type Invariant,
  type ReplayOptions,
  type ReplayResult,
  replayCaptures,
  type SessionTokens,
  type Violation,
} from './replay/replay-captures.js';
export { ANALYSIS_HEAP_FLAGS, tuneHeapForAnalysis } from './report/analysis-heap.js';
export type { MatchTarget, ScriptedToolCall } from './sim/reply-script.js';
export { ResponseStore, type ResponseStoreOptions } from './sim/response-store.js';
export {
  type CacheOutcome,
  type ProviderCounters,
  SimContext,
  type SimContextOptions,
  type SimCounters,
} from './sim/sim-context.js';
export { SourceRecords } from './sources/source-records.js';
export type { SourceRequest } from './sources/source-request.js';
export type { FixStateHealth } from './state/fix-state-open.js';
export type { LiveFeed, LiveFeedHealth, StateHealth } from './state/proxy-state.js';
export type { OtlpOptions } from './telemetry/otlp-config.js';
export type { ScanArray, ScanLeaf, ScanNode, ScanObject } from './wire/json-scan.js';
export type { Provider } from './wire/provider-errors.js';
export {
  type ByteSpan,
  detectFormat,
  formatFromRoute,
  parseRequestBody,
  type RawUnit,
  type RequestBody,
  type UnitForm,
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
