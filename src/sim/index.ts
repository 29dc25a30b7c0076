// The `cacheward/sim` entry point: the offline provider simulator and its reply scripts.
// Exports only what works; the cache models it serves live in `cacheward` (src/cache/).

export { CachewardError, type ErrorCode } from '../core/errors.js';
export {
  AlreadyListeningError,
  type Listening,
  type ListenOptions,
  NotListeningError,
} from '../core/listen.js';
export { type Logger, lineLogger } from '../core/logger.js';
export { type Fault, type FaultName, type FaultRate, parseFaultRates, parseFaults } from './faults.js';
export {
  parseReplyScript,
  type ReplyScript,
  ReplyScriptError,
  type ScriptedConversation,
  type ScriptedTurn,
} from './reply-script.js';
export { createSimulator, type Simulator, type SimulatorOptions } from './simulator.js';
