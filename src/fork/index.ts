// The `cacheward/fork` entry point: fork requests that read the parent's cache, the parity check, and the
// background runner that applies only fresh, validated results.

export { CachewardError, type ErrorCode } from '../core/errors.js';
export {
  BackgroundForks,
  type BackgroundForksOptions,
  type ForkOutcome,
  ForkRefusedError,
  type ForkReply,
  type ForkTask,
  type ValidReply,
  validateReply,
} from './background-forks.js';
export {
  type ForkedRequest,
  type ForkOptions,
  type ForkParent,
  type ForkParity,
  ForkParityError,
  forkRequest,
  verifyForkParity,
} from './fork-request.js';
