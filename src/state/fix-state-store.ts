// Fix state by request: what every fix's state was after a request went out, so the next request of the
// conversation (or a fork of it) starts from its parent's state. Memory-bounded; persistence is state-file's job.

import { LruMap } from '../core/lru-map.js';

/** The states of every fix, by fix name, after one request. */
export type FixStates = ReadonlyMap<string, unknown>;

/** Options for {@link FixStateStore}. */
export interface FixStateStoreOptions {
  /** How many requests' states to keep (least recently used go first). Default 20,000. */
  maxRequests?: number;
}

export class FixStateStore {
  private readonly states: LruMap<FixStates>;

  constructor(options: FixStateStoreOptions = {}) {
    this.states = new LruMap(options.maxRequests ?? 20_000);
  }

  get size(): number {
    return this.states.size;
  }

  /** The states after `request`; undefined for a request never seen (a new conversation starts fresh). */
  get(request: string | undefined): FixStates | undefined {
    return request === undefined ? undefined : this.states.get(request);
  }

  set(request: string, states: FixStates): void {
    this.states.set(request, states);
  }
}
