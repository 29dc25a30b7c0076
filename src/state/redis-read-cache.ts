// This proxy's copy of the conversations it served last, kept true by Redis's invalidation messages
// (server-assisted client-side caching, BCAST under the state prefix), so a continuation needs no read.
// It never vouches for a key another proxy may have written since it was read: unsure means a load.
//
// How it stays true. The data connection runs `CLIENT TRACKING ON REDIRECT <sub> BCAST PREFIX <p> NOLOOP`:
// Redis pushes, to a subscriber connection on `__redis__:invalidate`, the name of every key under the
// prefix that another connection writes (or that expires). Each pushed key gets the next sequence number.
// An entry remembers the sequence number when the data it holds was asked for (before the load was sent):
// it is stored only if none of its keys has a later one, and dropped by the first invalidation of any of
// them after that; it is used only while both connections have stayed up (a reconnect starts a new epoch
// and empties the cache) and while it is young. Every load under a label
// also writes `t:LABEL` (a plain SET beside the load script), so another proxy's load of the same session
// kills this proxy's entry before that proxy forwards anything. What an entry cannot know (that the new
// turn's transcript keys are still absent) is checked by the commit script, which loses the
// compare-and-swap if it was wrong.
//
// NOLOOP spares this proxy the invalidations of its own plain commands, but not of its scripts (Redis 7.0
// reports a script's writes as another client's). Redis sends one message per script, and only a
// request's own commit writes its `f:ID`: a message naming the `f:ID` of a commit this proxy sent is that
// commit's own, and is skipped. (A Redis that sends one message per key only makes entries die sooner.)

import type { LoadedState } from './conversation-view.js';
import type { RequestFixState } from './fix-state-codec.js';

/** The state one label's latest request left, as this proxy committed it. */
export interface WarmEntry {
  label: string;
  /** The committed request, and the transcript key where its messages end. */
  tip: string;
  tipFinal: string;
  /** The conversation state after its commit (passing entries left out: they are not tracked by key). */
  loaded: LoadedState;
  /** The Redis keys that state was read from or written to. */
  keys: string[];
  /** The invalidation sequence number when its data was asked for, and the epoch then. */
  since: number;
  epoch: number;
  /** When it was stored (ms, this process's clock). */
  at: number;
  /** The fix state the request left, and its parts by fix (hash). */
  fix: RequestFixState;
  parts: Map<string, string>;
}

/** Where a load started: the sequence number and epoch it is valid from (undefined: tracking is down). */
export interface CacheMark {
  since: number;
  epoch: number;
}

export interface ReadCacheOptions {
  /** Labels kept. Default 1,000. */
  maxEntries?: number;
  /** Invalidated key names remembered; past it, older entries count as invalidated. Default 100,000. */
  maxTracked?: number;
  /** An entry older than this is not used (ms). Default 5 minutes, far below every key's expiry. */
  maxAgeMs?: number;
  /** An entry holding more keys than this is not kept (a load is cheaper than checking them). */
  maxKeys?: number;
}

export class RedisReadCache {
  private seq = 0;
  /** Invalidations forgotten for room: an entry from before this sequence number is not trusted. */
  private floor = 0;
  private readonly touched = new Map<string, number>();
  private readonly entries = new Map<string, WarmEntry>();
  /** Which labels' entries hold each key, so an invalidation drops them at once. */
  private readonly holders = new Map<string, Set<string>>();
  private readonly pending = new Map<string, Promise<unknown>>();
  /** The `f:ID` keys of this proxy's commits whose invalidation message has not come back yet. */
  private readonly own = new Set<string>();
  private epoch = 0;
  private live = false;
  private readonly maxEntries: number;
  private readonly maxTracked: number;
  private readonly maxAgeMs: number;
  private readonly maxKeys: number;
  readonly counts = { hits: 0, misses: 0, invalidations: 0, epochs: 0 };

  constructor(options: ReadCacheOptions = {}) {
    this.maxEntries = options.maxEntries ?? 1_000;
    this.maxTracked = options.maxTracked ?? 100_000;
    this.maxAgeMs = options.maxAgeMs ?? 5 * 60_000;
    this.maxKeys = options.maxKeys ?? 400;
  }

  /** Whether invalidations are flowing (tracking on, subscriber up). */
  get isLive(): boolean {
    return this.live;
  }

  /** Tracking is confirmed on: a new epoch, nothing from before it counts. */
  up(): void {
    this.reset();
    this.live = true;
  }

  /** A connection dropped or tracking is not confirmed: nothing is trusted until {@link up}. */
  down(): void {
    if (!this.live && this.entries.size === 0) return;
    this.reset();
    this.live = false;
  }

  /** Taken before a load is sent: what that load's data will be valid from. */
  mark(): CacheMark | undefined {
    return this.live ? { since: this.seq, epoch: this.epoch } : undefined;
  }

  /** Keys another connection wrote (null: the whole database was flushed). */
  invalidated(keys: readonly string[] | null): void {
    if (keys === null) {
      const wasLive = this.live;
      this.reset();
      this.live = wasLive;
      return;
    }
    if (this.own.size > 0 && keys.some((k) => this.own.has(k))) {
      for (const k of keys) this.own.delete(k);
      return;
    }
    for (const k of keys) {
      this.counts.invalidations++;
      const n = ++this.seq;
      this.touched.delete(k);
      this.touched.set(k, n);
      const labels = this.holders.get(k);
      if (labels) for (const label of [...labels]) this.drop(label);
    }
    while (this.touched.size > this.maxTracked) {
      const [oldest, n] = this.touched.entries().next().value as [string, number];
      this.touched.delete(oldest);
      this.floor = Math.max(this.floor, n);
    }
  }

  /** A commit for `label` is on its way: the next request of the label waits for it before looking. */
  committing(label: string, done: Promise<unknown>): void {
    this.pending.set(label, done);
    const clear = () => {
      if (this.pending.get(label) === done) this.pending.delete(label);
    };
    done.then(clear, clear);
  }

  /** A commit script that writes `fixKey` is about to be sent: its invalidation message is its own. */
  ownWrite(fixKey: string): void {
    if (this.own.size >= 10_000) this.own.clear();
    this.own.add(fixKey);
  }

  /** That script wrote nothing (it lost, or failed): no message will come. */
  ownWriteDone(fixKey: string): void {
    this.own.delete(fixKey);
  }

  pendingOf(label: string): Promise<unknown> | undefined {
    return this.pending.get(label);
  }

  /** Stores an entry, unless a key of it was invalidated since its data was asked for. */
  put(entry: WarmEntry): void {
    this.drop(entry.label);
    if (entry.keys.length > this.maxKeys || !this.valid(entry, entry.at)) return;
    for (const k of entry.keys) {
      const set = this.holders.get(k);
      if (set) set.add(entry.label);
      else this.holders.set(k, new Set([entry.label]));
    }
    this.entries.set(entry.label, entry);
    while (this.entries.size > this.maxEntries) {
      const oldest = this.entries.keys().next().value;
      if (oldest === undefined) break;
      this.drop(oldest);
    }
  }

  drop(label: string): void {
    const e = this.entries.get(label);
    if (!e) return;
    this.entries.delete(label);
    for (const k of e.keys) {
      const set = this.holders.get(k);
      set?.delete(label);
      if (set?.size === 0) this.holders.delete(k);
    }
  }

  /** The label's entry if every key it holds is still as it was read; else undefined (and it is gone). */
  get(label: string, now: number): WarmEntry | undefined {
    const e = this.entries.get(label);
    if (!e) return undefined;
    // Its keys were checked when it was stored, and any invalidation since dropped it.
    if (this.live && e.epoch === this.epoch && now - e.at <= this.maxAgeMs) {
      this.counts.hits++;
      return e;
    }
    this.drop(label);
    this.counts.misses++;
    return undefined;
  }

  private valid(e: WarmEntry, now: number): boolean {
    if (!this.live || e.epoch !== this.epoch || e.since < this.floor || now - e.at > this.maxAgeMs)
      return false;
    for (const k of e.keys) if ((this.touched.get(k) ?? 0) > e.since) return false;
    return true;
  }

  private reset(): void {
    this.entries.clear();
    this.holders.clear();
    this.touched.clear();
    this.own.clear();
    this.epoch++;
    this.counts.epochs++;
    this.floor = this.seq;
  }
}
