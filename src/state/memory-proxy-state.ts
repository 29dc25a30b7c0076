// The single-machine state: the conversation index and fix state in bounded memory, saved to one state
// file (coalesced, atomic) so a restart continues every conversation. It never needs a network.

import { longestCacheTtlMs } from '../cache/longest-ttl.js';
import { liveStoreBounds, MemoryConversationStore } from '../conversation/conversation-store.js';
import { ConversationTracker, countsAsTurn } from '../conversation/conversation-tracker.js';
import { LruMap } from '../core/lru-map.js';
import { runStepped } from '../core/stepped-work.js';
import { type ForwardedPair, keyedPair } from '../fixes/stability.js';
import { formatFromRoute } from '../wire/request-body.js';
import type { RequestFixState } from './fix-state-codec.js';
import { type FixStateHealth, openStateFile } from './fix-state-open.js';
import { FixStateStore, type FixStates } from './fix-state-store.js';
import { jsonAndSha1Steps } from './json-steps.js';
import type { PreparedRequest, PrepareResult, ProxyState, StateCommit, StateHealth } from './proxy-state.js';
import type { StateDocument, StateFile } from './state-file.js';

export interface MemoryProxyStateOptions {
  /** Where the state file goes; none: memory only (nothing to keep without fixes). */
  stateDir?: string;
  log?: (line: string) => void;
  /** The most conversations remembered (least recently used go first, and any after its cache's TTL). */
  maxConversations?: number;
  /** The longest the state file's snapshot runs before it yields (ms; default 4). */
  snapshotSliceMs?: number;
}

/** The longest the state file's snapshot runs before it lets other work in (ms). */
const SNAPSHOT_SLICE_MS = 4;

/** Conversations the proxy remembers by default: memory stays under a fixed bound however many pass. */
export const DEFAULT_MAX_CONVERSATIONS = 10_000;

export class MemoryProxyState implements ProxyState {
  readonly kind = 'memory' as const;
  readonly commitAt = 'status' as const;
  readonly local: ConversationTracker;
  // Fix state follows the conversation: by request, so a fork starts from its parent's state at the fork.
  private readonly fixStates: FixStateStore;
  private readonly forwardedPairs = new LruMap<ForwardedPair>(256);
  /** When each request committed here stops mattering, saved with the file so a restart keeps to it. */
  private readonly expiries: LruMap<number>;
  private readonly stateFile: StateFile | undefined;
  private readonly fileHealth: FixStateHealth;
  private readonly maxConversations: number;
  /** Each fix state's content hash, made once per state object (the state file's parts). */
  private readonly hashOf = new WeakMap<object, string>();
  /**
   * The JSON of each element of the states' long arrays (a history's message shapes), made once per object:
   * a conversation's next state shares its earlier messages' objects, so a snapshot writes only the new ones.
   * States are never changed once committed (the hashes above rely on it too).
   */
  private readonly elementJson = new WeakMap<object, string>();
  /** The parts the last state file held, by hash: a state that did not change is not stringified again. */
  private lastParts = new Map<string, string>();
  private readonly sliceMs: number;

  constructor(options: MemoryProxyStateOptions = {}) {
    const max = options.maxConversations ?? DEFAULT_MAX_CONVERSATIONS;
    this.maxConversations = max;
    this.sliceMs = options.snapshotSliceMs ?? SNAPSHOT_SLICE_MS;
    this.local = new ConversationTracker(
      new MemoryConversationStore({
        ...liveStoreBounds(max),
        // A request the store forgot can never be a parent again: its fix state goes with it.
        onForget: (request) => {
          this.fixStates.delete(request);
          this.forwardedPairs.delete(request);
        },
      }),
    );
    this.fixStates = new FixStateStore({ maxRequests: max * 2 });
    this.expiries = new LruMap(max * 4);
    // A folder that cannot be written keeps state in memory only: said once, and on the health endpoint.
    const opened = openStateFile(options.stateDir, options.log ?? (() => {}));
    this.stateFile = opened.file;
    this.fileHealth = opened.health;
    const saved = this.stateFile?.load();
    if (saved) this.restore(saved);
  }

  /**
   * Loads a saved document: each conversation and fix state expires when it would have, had the proxy
   * kept running (a file from before expiries were saved: the longest any provider's cache keeps).
   */
  private restore(saved: StateDocument): void {
    const expires = new Map(saved.expires ?? []);
    const tips = new Map(saved.conversations.requests.map((r) => [r.id, r]));
    const expiryOf = (id: string) =>
      expires.get(id) ?? (tips.get(id)?.time ?? 0) + longestCacheTtlMs(undefined);
    const store = this.local.store;
    for (const c of saved.conversations.conversations) {
      const tip = tips.get(c.tip);
      const at = expiryOf(c.tip);
      this.expiries.set(c.tip, at);
      store.stamp(at);
      this.local.restore({ version: 1, conversations: [c], requests: tip ? [tip] : [] });
    }
    store.stamp(undefined);
    for (const [request, states] of saved.fixStates)
      this.fixStates.set(request, new Map(Object.entries(states)), expiryOf(request));
  }

  async prepare(...args: Parameters<ConversationTracker['resolve']>): Promise<PrepareResult> {
    // In steps, behind any stepped commit under way (the recorder's of a huge exchange, say): a first-seen
    // 100,000-message history never resolves in one hold of the event loop, and never against half a commit.
    const tracked = await runStepped(this.local.resolveSteps(...args));
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
    if (!countsAsTurn(route, status) || !(await runStepped(this.local.commitSteps(p.tracked, route, status))))
      return { outcome: 'not-turn' };
    const time = p.tracked.request.time;
    // As long as its provider's cache can keep anything of it readable (the tracker stamps the same).
    const expiresAt = time + longestCacheTtlMs(formatFromRoute(route));
    this.expiries.set(p.tracked.request.id, expiresAt, expiresAt);
    this.expiries.prune(time);
    if (after) {
      this.forwardedPairs.set(p.tracked.request.id, keyedPair(after.pair, p.parentPair));
      // In steps (the states are kept at once, their shared copy made a few hundred elements at a time):
      // a huge history seen for the first time never holds the event loop for all of it.
      await runStepped(this.fixStates.setSteps(p.tracked.request.id, after.states, expiresAt));
    }
    this.fixStates.prune(time);
    this.stateFile?.schedule(() => this.snapshot());
    return { outcome: 'committed' };
  }

  started(): void {}

  /** How much is held against the bounds (tests, health). */
  sizes(): ReturnType<MemoryConversationStore['sizes']> & { fixStates: number } {
    return { ...this.local.store.sizes(), fixStates: this.fixStates.size };
  }

  health(): StateHealth {
    // Saving that fails now (a full disk) is said as not persisted, with why, until a save works again.
    const saveError = this.stateFile?.saveError;
    const fileHealth: FixStateHealth =
      saveError !== undefined ? { ...this.fileHealth, persisted: false, error: saveError } : this.fileHealth;
    return {
      kind: 'memory',
      status: fileHealth.error !== undefined ? 'degraded' : 'ok',
      failedOpen: 0,
      outages: 0,
      recomputed: 0,
      notCommitted: 0,
      ...(fileHealth.dir !== undefined || fileHealth.persisted ? { fixState: fileHealth } : {}),
    };
  }

  metricsText(): string {
    return '';
  }

  async close(): Promise<void> {
    await this.stateFile?.flush(true);
  }

  /**
   * The state file's text: each conversation's tip and its fix states, every distinct state once. The
   * conversations are written as they are now, in one go; the fix states they name (never changed once
   * made) are written a few ms at a time, yielding between, so a snapshot of many long conversations never
   * holds the event loop for all of them.
   */
  private async snapshot(): Promise<string> {
    const conv = this.local.store.snapshot(this.maxConversations);
    const convText = JSON.stringify(conv);
    const tipStates: Array<[string, FixStates]> = [];
    const expires: Array<[string, number]> = [];
    for (const r of conv.requests) {
      const st = this.fixStates.get(r.id);
      if (st) tipStates.push([r.id, st]);
      const at = this.expiries.peek(r.id);
      if (at !== undefined) expires.push([r.id, at]);
    }
    const parts = new Map<string, string>();
    const tips: string[] = [];
    let sliceStart = performance.now();
    for (const [id, st] of tipStates) {
      const names: Record<string, string> = {};
      for (const [fix, state] of st) {
        const part = await runStepped(this.partSteps(state), this.sliceMs);
        parts.set(part.hash, part.json);
        names[fix] = part.hash;
      }
      tips.push(JSON.stringify([id, names]));
      if (performance.now() - sliceStart >= this.sliceMs) {
        await new Promise((r) => setImmediate(r));
        sliceStart = performance.now();
      }
    }
    this.lastParts = parts;
    const partsText = [...parts].map(([h, json]) => `${JSON.stringify(h)}:${json}`).join(',');
    return `{"version":2,"conversations":${convText},"fixStates":[${tips.join(',')}],"parts":{${partsText}},"expires":${JSON.stringify(expires)}}`;
  }

  /** A state's part of the file: its JSON and that JSON's hash, written in steps (a huge history's too). */
  private *partSteps(state: unknown): Generator<void, { hash: string; json: string }> {
    const key = state && typeof state === 'object' ? state : undefined;
    const known = key ? this.hashOf.get(key) : undefined;
    const json = known !== undefined ? this.lastParts.get(known) : undefined;
    if (known !== undefined && json !== undefined) return { hash: known, json };
    const written = yield* jsonAndSha1Steps(state, this.elementJson);
    if (key) this.hashOf.set(key, written.sha1);
    return { hash: written.sha1, json: written.json };
  }
}
