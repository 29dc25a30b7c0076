// The `cacheward/testing` entry point: assert cache behaviour in an agent's own test suite, offline.
// Exports only what works; everything here runs in-process on a virtual clock.

export { VirtualClock } from '../core/clock.js';
export { CachewardError, type ErrorCode } from '../core/errors.js';
export { assertReadsParent, CacheAssertionError, type ReadsParentOptions } from './cache-assertions.js';
export {
  type CacheTestbed,
  type CacheTestbedOptions,
  createCacheTestbed,
  type SdkOptions,
  type TestbedRequest,
} from './cache-testbed.js';
