// The `cacheward/proxy` entry point: the capturing proxy, its in-process `fetch` wrapper, and captures.
// Exports only what works; fixes plug into the proxy through the registry, and are tested by the replay gate.

export {
  captureFiles,
  type ReadCapturesOptions,
  type ReadRecord,
  readCaptures,
} from '../capture/capture-reader.js';
export { type CaptureState, CaptureWriter, type CaptureWriterOptions } from '../capture/capture-writer.js';
export { defaultCaptureDir } from '../capture/default-dir.js';
export { CachewardError, type ErrorCode } from '../core/errors.js';
export {
  AlreadyListeningError,
  type Listening,
  type ListenOptions,
  NotListeningError,
} from '../core/listen.js';
export { type Logger, lineLogger } from '../core/logger.js';
export {
  type DeclaredChange,
  type Fix,
  type FixContext,
  FixRegistry,
  type FixRequest,
  type FixResult,
  type PipelineResult,
  runFixes,
  UnknownFixError,
} from '../fixes/fix.js';
export { type FixStageInput, type FixStageResult, runFixStage } from '../fixes/fix-stage.js';
export { pinReminders } from '../fixes/pin-reminders.js';
export { fixRegistry } from '../fixes/registry.js';
export { checkStability, type ForwardedPair, type StabilityCheck } from '../fixes/stability.js';
export { stripBillingHeader } from '../fixes/strip-billing-header.js';
export { toolsFreeze } from '../fixes/tools-freeze.js';
export { toolsSort } from '../fixes/tools-sort.js';
export { ttlFix } from '../fixes/ttl.js';
export type {
  CapturedBlock,
  CapturedPrefix,
  CaptureMode,
  CaptureRecord,
  FixNote,
} from '../record/capture-record.js';
export {
  type Invariant,
  type ReplayOptions,
  type ReplayResult,
  replayCaptures,
  type SessionTokens,
  type Violation,
} from '../replay/replay-captures.js';
export {
  type CachewardProxy,
  createProxy,
  DEFAULT_ANTHROPIC_UPSTREAM,
  DEFAULT_OPENAI_UPSTREAM,
  ProxyConfigError,
  type ProxyHealth,
  type ProxyOptions,
} from './create-proxy.js';
export { type ForwardOptions, PROVIDER_HOSTS, type TunnelPolicy } from './forward-proxy.js';
export { type LiveRequest, liveLogLine } from './live-analysis.js';
export { defaultCaDir, LocalCa, LocalCaError, type LocalCaOptions } from './local-ca.js';
export { PROXY_HEAP_FLAGS, tuneHeapForProxy } from './proxy-heap.js';
export { type CapturingFetch, type WrapFetchOptions, wrapFetch } from './wrap-fetch.js';
