// Fix state by request: what every fix's state was after a request went out, so the next request of the
// conversation (or a fork of it) starts from its parent's state. Memory-bounded (count, age, shared parts);
// persistence is state-file's job. It never does I/O.

import { LruMap } from '../core/lru-map.js';
import { drainSteps } from '../core/steps.js';
import { SharedValues } from './shared-values.js';

/** The states of every fix, by fix name, after one request. */
export type FixStates = ReadonlyMap<string, unknown>;

/** Options for {@link FixStateStore}. */
export interface FixStateStoreOptions {
  /** How many requests' states to keep (least recently used go first). Default 20,000. */
  maxRequests?: number;
}

export class FixStateStore {
  private readonly states: LruMap<FixStates>;
  private readonly shared = new SharedValues();

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

  /**
   * Keeps `states` for `request` (until `expiresAt`, when given: after its cache's longest TTL nothing can
   * depend on it). Equal parts of different conversations' states are stored once.
   */
  set(request: string, states: FixStates, expiresAt?: number): void {
    drainSteps(this.setSteps(request, states, expiresAt));
  }

  /**
   * {@link set} in bounded steps: `states` are kept as given at once (a request that starts from them
   * meanwhile finds them), and their shared copy takes their place once made, unless the entry was
   * forgotten or replaced in between.
   */
  *setSteps(request: string, states: FixStates, expiresAt?: number): Generator<void, void> {
    const given = new Map(states);
    this.states.set(request, given, expiresAt);
    const kept = new Map<string, unknown>();
    for (const [name, state] of states) kept.set(name, yield* this.shared.shareSteps(state));
    if (this.states.peek(request) === given) this.states.set(request, kept, expiresAt);
  }

  /** Forgets `request`'s states (its conversation was forgotten: nothing can start from them). */
  delete(request: string): void {
    this.states.delete(request);
  }

  /** Forgets states that expired by `now`. */
  prune(now: number): void {
    this.states.prune(now);
  }

  /** Requests and their states, oldest first. */
  entries(): IterableIterator<[string, FixStates]> {
    return this.states.entries();
  }
}
