// The cache's memory: entries by key with a lifetime, refreshed on read, swept when expired, capped in size.
// Pure data structure: every method takes the time; it never reads a clock and never does I/O.

/** One cached prefix. Times are ms since the epoch. */
export interface CacheEntry {
  key: string;
  tokens: number;
  ttlMs: number;
  /** When it stops being readable unless read again. */
  expiresAt: number;
  /** When it becomes readable: the writing response's first byte (Infinity until then). */
  readableAt: number;
  writtenAt: number;
  /** The request that wrote it (for readability once that response begins). */
  writer: string;
}

/**
 * A copy of an entry as it is now: what a request's result keeps, so that later requests (which refresh,
 * extend and mark the stored entry readable) do not change what that result says. One literal, one shape.
 */
export function entrySnapshot(e: CacheEntry): CacheEntry {
  return {
    key: e.key,
    tokens: e.tokens,
    ttlMs: e.ttlMs,
    expiresAt: e.expiresAt,
    readableAt: e.readableAt,
    writtenAt: e.writtenAt,
    writer: e.writer,
  };
}

/** Options for an {@link EntryStore}. */
export interface EntryStoreOptions {
  /**
   * The most entries kept; past it the oldest-expiring go first. Default 2,000,000. Expired entries are
   * remembered (to name what a miss lost) up to a quarter of it, at most 100,000.
   */
  maxEntries?: number;
  /** The most expired entries remembered, when fewer than the default will do (a report's own horizon). */
  maxExpired?: number;
}

const BUCKET_MS = 60_000;

/**
 * Entries with expiry buckets (one per minute): `sweep(now)` drops every bucket that has fully expired,
 * checking each entry's own expiry (a read may have moved it to a later bucket). Memory is bounded by the
 * live entries plus `maxEntries`.
 */
export class EntryStore {
  private readonly entries = new Map<string, CacheEntry>();
  /** Entries that expired, remembered (bounded) so a miss can say which entry it lost and with what TTL. */
  private readonly expiredEntries = new Map<string, CacheEntry>();
  /** Remembered expired entries in the order they expired, oldest first from `expiredHead` (some gone since). */
  private readonly expiredOrder: CacheEntry[] = [];
  private expiredHead = 0;
  private readonly buckets = new Map<number, Set<string>>();
  private readonly max: number;
  private readonly maxExpired: number;
  private swept = Number.NEGATIVE_INFINITY;
  readonly stats = { writes: 0, reads: 0, evicted: 0, expired: 0 };

  constructor(options: EntryStoreOptions = {}) {
    this.max = options.maxEntries ?? 2_000_000;
    // A quarter of the live bound, at most 100,000: a long-running store (the proxy's live analysis, 100,000
    // entries) would otherwise go on growing by every entry that expired until it held twice its bound.
    this.maxExpired = Math.min(Math.floor(this.max / 4), 100_000, options.maxExpired ?? Infinity);
  }

  /** How many entries are held: live (or expired, not yet swept) and remembered after they expired. */
  sizes(): { entries: number; expired: number } {
    return { entries: this.entries.size, expired: this.expiredEntries.size };
  }

  get size(): number {
    return this.entries.size;
  }

  /** A live, readable entry at `key`, or undefined. */
  lookup(key: string, now: number): CacheEntry | undefined {
    const e = this.entries.get(key);
    if (!e) return undefined;
    if (e.expiresAt <= now) return undefined;
    if (e.readableAt > now) return undefined;
    return e;
  }

  /** An entry that exists and has not expired, readable or not (a write still in flight). */
  peek(key: string, now: number): CacheEntry | undefined {
    const e = this.entries.get(key);
    return e && e.expiresAt > now ? e : undefined;
  }

  /** An entry at `key` that had expired by `now` (still listed, or remembered after its sweep). */
  expired(key: string, now: number): CacheEntry | undefined {
    const e = this.entries.get(key);
    if (e && e.expiresAt <= now) return e;
    return e ? undefined : this.expiredEntries.get(key);
  }

  /** Refreshes an entry read by a request that started at `start`: it lives `ttl` from then, at least. */
  touch(entry: CacheEntry, start: number): void {
    this.stats.reads++;
    const expiresAt = Math.max(entry.expiresAt, start + entry.ttlMs);
    if (expiresAt !== entry.expiresAt) {
      entry.expiresAt = expiresAt;
      this.bucketFor(entry);
    }
  }

  /**
   * Writes an entry. When a live entry is already there (another request writing the same prefix at the
   * same time), it is kept and extended: whichever writer's response begins first makes it readable.
   */
  write(
    key: string,
    tokens: number,
    ttlMs: number,
    start: number,
    writer: string,
    readableAt: number,
  ): CacheEntry {
    this.stats.writes++;
    const prior = this.entries.get(key);
    this.expiredEntries.delete(key);
    if (prior && prior.expiresAt > start) {
      prior.ttlMs = Math.max(prior.ttlMs, ttlMs);
      prior.expiresAt = Math.max(prior.expiresAt, start + ttlMs);
      prior.readableAt = Math.min(prior.readableAt, readableAt);
      this.bucketFor(prior);
      return prior;
    }
    const entry: CacheEntry = {
      key,
      tokens,
      ttlMs,
      expiresAt: start + ttlMs,
      readableAt,
      writtenAt: start,
      writer,
    };
    this.entries.set(key, entry);
    this.bucketFor(entry);
    if (this.entries.size > this.max) this.evictSoonest();
    return entry;
  }

  /** The writer's response has begun: its entries become readable from `at`. */
  markReadable(entries: readonly CacheEntry[], at: number): void {
    for (const e of entries) if (e.readableAt > at) e.readableAt = at;
  }

  /** Drops every entry that expired before `now`. Cheap when called often: it only visits whole buckets. */
  sweep(now: number): void {
    const limit = Math.floor(now / BUCKET_MS);
    if (limit <= this.swept) return;
    for (const [bucket, keys] of this.buckets) {
      if (bucket >= limit) continue;
      for (const key of keys) {
        const e = this.entries.get(key);
        if (e && e.expiresAt <= now) {
          this.entries.delete(key);
          this.stats.expired++;
          this.remember(e);
        }
      }
      this.buckets.delete(bucket);
    }
    // An entry still alive in a swept bucket was refreshed, and so is listed in its later bucket too.
    this.swept = limit - 1;
  }

  private remember(e: CacheEntry): void {
    this.expiredEntries.set(e.key, e);
    this.expiredOrder.push(e);
    // The oldest remembered goes first. Not by the Map's own first key: every delete at its front leaves a
    // hole a new iterator walks over again, until the table is rebuilt.
    while (this.expiredEntries.size > this.maxExpired && this.expiredHead < this.expiredOrder.length) {
      const oldest = this.expiredOrder[this.expiredHead++] as CacheEntry;
      if (this.expiredEntries.get(oldest.key) === oldest) this.expiredEntries.delete(oldest.key);
    }
    // Slots of entries gone since (written again, or remembered again) are dropped now and then.
    if (this.expiredHead > 1_024 && this.expiredHead * 2 > this.expiredOrder.length) {
      this.expiredOrder.splice(0, this.expiredHead);
      this.expiredHead = 0;
    }
    if (this.expiredOrder.length > 2 * this.maxExpired + 1_024) {
      let kept = 0;
      for (let i = this.expiredHead; i < this.expiredOrder.length; i++) {
        const x = this.expiredOrder[i] as CacheEntry;
        if (this.expiredEntries.get(x.key) === x) this.expiredOrder[kept++] = x;
      }
      this.expiredOrder.length = kept;
      this.expiredHead = 0;
    }
  }

  clear(): void {
    this.expiredEntries.clear();
    this.expiredOrder.length = 0;
    this.expiredHead = 0;
    this.entries.clear();
    this.buckets.clear();
    this.swept = Number.NEGATIVE_INFINITY;
  }

  private bucketFor(e: CacheEntry): void {
    const b = Math.floor(e.expiresAt / BUCKET_MS);
    let set = this.buckets.get(b);
    if (!set) {
      set = new Set();
      this.buckets.set(b, set);
    }
    set.add(e.key);
  }

  /** Over the cap: drop the entries that expire soonest, down to 99% of the cap (amortized, not one by one). */
  private evictSoonest(): void {
    const target = Math.floor(this.max * 0.99);
    const order = [...this.buckets.keys()].sort((a, b) => a - b);
    for (const bucket of order) {
      const keys = this.buckets.get(bucket);
      if (!keys) continue;
      for (const key of keys) {
        if (this.entries.size <= target) return;
        if (this.entries.delete(key)) this.stats.evicted++;
        keys.delete(key);
      }
      this.buckets.delete(bucket);
    }
  }
}
