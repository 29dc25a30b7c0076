// The `cacheward/guard` entry point: the tool gate for forks, the stale-state guard, and the CAS file store.
// Background work that must never write stale state uses these; none of them calls a model.

export type { Decision } from '../core/decision.js';
export { CachewardError, type ErrorCode } from '../core/errors.js';
export {
  CasConflictError,
  CasContext,
  type CasDocument,
  CasFileStore,
  type CasFileStoreOptions,
  type CasSnapshot,
  LockTimeoutError,
  NotReadFirstError,
} from './cas-file-store.js';
export { checkNotStale, type StaleDecision, StaleGuard, snapshotToken } from './snapshot-token.js';
export {
  defaultIsWrite,
  type GateDecision,
  ToolGate,
  type ToolGateOptions,
  type WriteClassifier,
} from './tool-gate.js';
