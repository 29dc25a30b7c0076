// The `cacheward/proxy` entry point: the capturing proxy, its in-process `fetch` wrapper, and the fixes.
// Only what a user needs: the capture reader is `cacheward`'s, the pipeline's parts are cacheward/internal's.

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
  UnknownFixError,
} from '../fixes/fix.js';
export { pinReminders } from '../fixes/pin-reminders.js';
export { fixRegistry } from '../fixes/registry.js';
export { stripBillingHeader } from '../fixes/strip-billing-header.js';
export { toolsFreeze } from '../fixes/tools-freeze.js';
export { toolsSort } from '../fixes/tools-sort.js';
export { ttlFix } from '../fixes/ttl.js';
export type { CaptureMode, FixNote } from '../record/capture-record.js';
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
export type {
  LiveAnalysis,
  LiveDetail,
  LiveListener,
  LiveMinute,
  LiveRequest,
  LiveSession,
  LiveSnapshot,
} from './live-analysis.js';
export { defaultCaDir, LocalCaError } from './local-ca.js';
export { tuneHeapForProxy } from './proxy-heap.js';
export { type CapturingFetch, type FetchLike, type WrapFetchOptions, wrapFetch } from './wrap-fetch.js';
