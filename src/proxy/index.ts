// The `cacheward/proxy` entry point: the capturing proxy, its in-process `fetch` wrapper, and captures.
// Exports only what works; fixes plug into the proxy through the registry.

export {
  captureFiles,
  type ReadCapturesOptions,
  type ReadRecord,
  readCaptures,
} from '../capture/capture-reader.js';
export type {
  CapturedBlock,
  CapturedPrefix,
  CaptureMode,
  CaptureRecord,
  FixNote,
} from '../capture/capture-record.js';
export { type CaptureState, CaptureWriter, type CaptureWriterOptions } from '../capture/capture-writer.js';
export { defaultCaptureDir } from '../capture/default-dir.js';
export {
  createProxy,
  DEFAULT_ANTHROPIC_UPSTREAM,
  DEFAULT_OPENAI_UPSTREAM,
  ProxyConfigError,
  type ProxyHealth,
  type ProxyOptions,
  type RunningProxy,
} from './create-proxy.js';
export { type CapturingFetch, type WrapFetchOptions, wrapFetch } from './wrap-fetch.js';
