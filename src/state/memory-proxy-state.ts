// The single-machine state: the conversation index and fix state in bounded memory, saved to one state
// file (coalesced, atomic) so a restart continues every conversation. It never needs a network.

import { ConversationTracker, countsAsTurn } from '../conversation/conversation-tracker.js';
import { LruMap } from '../core/lru-map.js';
import type { ForwardedPair } from '../fixes/stability.js';
import type { RequestFixState } from './fix-state-codec.js';
import { type FixStateHealth, openStateFile } from './fix-state-open.js';
import { FixStateStore } from './fix-state-store.js';
import type { PreparedRequest, PrepareResult, ProxyState, StateCommit, StateHealth } from './proxy-state.js';
import type { StateDocument, StateFile } from './state-file.js';

export interface MemoryProxyStateOptions {
  /** Where the state file goes; none: memory only (nothing to keep without fixes). */
  stateDir?: string;
  log?: (line: string) => void;
}

export class MemoryProxyState implements ProxyState {
  readonly kind = 'memory' as const;
  readonly local = new ConversationTracker();
  // Fix state follows the conversation: by request, so a fork starts from its parent's state at the fork.
  private readonly fixStates = new FixStateStore();
  private readonly forwardedPairs = new LruMap<ForwardedPair>(256);
  private readonly stateFile: StateFile | undefined;
  private readonly fileHealth: FixStateHealth;

  constructor(options: MemoryProxyStateOptions = {}) {
    // A folder that cannot be written keeps state in memory only: said once, and on the health endpoint.
    const opened = openStateFile(options.stateDir, options.log ?? (() => {}));
    this.stateFile = opened.file;
    this.fileHealth = opened.health;
    const saved = this.stateFile?.load();
    if (saved) {
      this.local.restore(saved.conversations);
      for (const [request, states] of saved.fixStates)
        this.fixStates.set(request, new Map(Object.entries(states)));
    }
  }

  async prepare(...args: Parameters<ConversationTracker['resolve']>): Promise<PrepareResult> {
    const tracked = this.local.resolve(...args);
    const parent = tracked.resolution.parent;
    return {
      ok: true,
      tracked,
      states: this.fixStates.get(parent),
      parentPair: parent ? this.forwardedPairs.get(parent) : undefined,
    };
  }

  async commit(
    p: PreparedRequest,
    route: string,
    status: number | undefined,
    after: RequestFixState | undefined,
  ): Promise<StateCommit> {
    if (p.tracked.committed) return { outcome: 'committed' };
    if (!countsAsTurn(route, status) || !this.local.commit(p.tracked, route, status))
      return { outcome: 'not-turn' };
    if (after) {
      this.fixStates.set(p.tracked.request.id, after.states);
      this.forwardedPairs.set(p.tracked.request.id, after.pair);
    }
    this.stateFile?.schedule(() => this.snapshot());
    return { outcome: 'committed' };
  }

  started(): void {}

  health(): StateHealth {
    return {
      kind: 'memory',
      status: this.fileHealth.error !== undefined ? 'degraded' : 'ok',
      failedOpen: 0,
      outages: 0,
      recomputed: 0,
      notCommitted: 0,
      ...(this.fileHealth.dir !== undefined || this.fileHealth.persisted
        ? { fixState: this.fileHealth }
        : {}),
    };
  }

  metricsText(): string {
    return '';
  }

  async close(): Promise<void> {
    await this.stateFile?.flush();
  }

  private snapshot(): StateDocument {
    const conv = this.local.snapshot();
    const tips = conv.requests.flatMap((r): Array<[string, Record<string, unknown>]> => {
      const st = this.fixStates.get(r.id);
      return st ? [[r.id, Object.fromEntries(st)]] : [];
    });
    return { version: 1, conversations: conv, fixStates: tips };
  }
}
