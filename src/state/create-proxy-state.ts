// Picks the proxy's state from `--state`: memory and a state file by default, Redis for a fleet. Redis's
// client is loaded only when asked for, so nothing needs Redis to start.

import type { ProxyState } from './proxy-state.js';
import { parseStateSpec } from './state-url.js';

export interface ProxyStateOptions {
  /** `memory` (default) or `redis://HOST:PORT[/DB]`. */
  state?: string;
  /** Redis key prefix. Default `cacheward:`. */
  statePrefix?: string;
  /** How long Redis may send nothing back before a waiting request goes out unfixed (ms). Default 1,000. */
  stateTimeoutMs?: number;
  /** Memory state: where the state file goes (none: nothing is saved). */
  stateDir?: string;
  log?: (line: string) => void;
}

/** The state `options` ask for; throws StateConfigError for a `--state` that cannot be used. */
export async function createProxyState(options: ProxyStateOptions): Promise<ProxyState> {
  const spec = parseStateSpec(options.state);
  if (spec.kind === 'memory') {
    const { MemoryProxyState } = await import('./memory-proxy-state.js');
    return new MemoryProxyState({
      ...(options.stateDir ? { stateDir: options.stateDir } : {}),
      ...(options.log ? { log: options.log } : {}),
    });
  }
  const { RedisProxyState } = await import('./redis-proxy-state.js');
  return RedisProxyState.connect({
    spec,
    ...(options.statePrefix !== undefined ? { prefix: options.statePrefix } : {}),
    ...(options.stateTimeoutMs !== undefined ? { budgetMs: options.stateTimeoutMs } : {}),
    ...(options.log ? { log: options.log } : {}),
  });
}
