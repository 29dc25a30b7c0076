// A map bounded by entry count and, optionally, by age: reads and writes make a key the youngest; past the
// cap the oldest go, and `prune(now)` drops entries whose expiry has passed. Pure: time is a parameter.

/** One entry, linked from the oldest to the youngest. */
interface Entry<V> {
  readonly key: string;
  value: V;
  /** Expiry (ms since the epoch), for entries set with one. */
  expiresAt: number | undefined;
  older: Entry<V> | undefined;
  newer: Entry<V> | undefined;
}

/**
 * The order lives in the entries' own links, not in the Map's insertion order: making a key the youngest
 * relinks two entries and writes nothing to the Map. A move through the Map (a delete and an insert) left a
 * hole each time, and the Map copied its whole table once enough piled up: a 40,000-entry table, several
 * ms in one read; the oldest, found as the Map's first key, had every hole before it walked over again
 * (~35 µs an eviction at 40,000 entries).
 */
export class LruMap<V> {
  private readonly map = new Map<string, Entry<V>>();
  private oldest: Entry<V> | undefined;
  private youngest: Entry<V> | undefined;
  /** No entry expires before this (a lower bound): {@link prune} before it has nothing to look at. */
  private earliest = Number.POSITIVE_INFINITY;
  /**
   * `onEvict` hears of every entry the map drops by itself (past the cap, or expired at {@link prune}), not
   * of explicit deletes: what an entry owns elsewhere can go with it.
   */
  constructor(
    readonly max: number,
    private readonly onEvict?: (key: string, value: V) => void,
  ) {}

  get size(): number {
    return this.map.size;
  }

  get(k: string): V | undefined {
    const e = this.map.get(k);
    if (e === undefined) return undefined;
    if (e.value !== undefined) this.touch(e);
    return e.value;
  }

  /** Sets `k`, the youngest now; with `expiresAt`, {@link prune} drops it once that time has passed. */
  set(k: string, v: V, expiresAt?: number): void {
    let e = this.map.get(k);
    if (e) {
      e.value = v;
      this.touch(e);
    } else {
      e = { key: k, value: v, expiresAt: undefined, older: this.youngest, newer: undefined };
      if (this.youngest) this.youngest.newer = e;
      else this.oldest = e;
      this.youngest = e;
      this.map.set(k, e);
    }
    e.expiresAt = expiresAt;
    if (expiresAt !== undefined && expiresAt < this.earliest) this.earliest = expiresAt;
    while (this.map.size > this.max) {
      const oldest = this.oldest;
      if (oldest === undefined) break;
      this.delete(oldest.key);
      this.onEvict?.(oldest.key, oldest.value);
    }
  }

  /** The oldest key and its value, without reordering. */
  first(): [string, V] | undefined {
    const e = this.oldest;
    return e ? [e.key, e.value] : undefined;
  }

  /** The value at `k` without making it the youngest. */
  peek(k: string): V | undefined {
    return this.map.get(k)?.value;
  }

  delete(k: string): void {
    const e = this.map.get(k);
    if (e === undefined) return;
    this.map.delete(k);
    this.unlink(e);
  }

  /**
   * Drops expired entries from the oldest end, looking past at most `patience` live ones (entries of longer
   * lifetimes may sit among them); returns how many went. Called on each write, it costs O(1) amortized.
   */
  prune(now: number, patience = 32): number {
    // Nothing can have expired yet: no walk (on a busy proxy, that is almost every call).
    if (now < this.earliest) return 0;
    let dropped = 0;
    let live = 0;
    let whole = true;
    let next = Number.POSITIVE_INFINITY;
    const gone: Array<Entry<V>> = [];
    for (let e = this.oldest; e !== undefined; e = e.newer) {
      const exp = e.expiresAt;
      if (exp !== undefined && exp <= now) gone.push(e);
      else {
        if (exp !== undefined && exp < next) next = exp;
        if (++live > patience) {
          whole = false;
          break;
        }
      }
    }
    // Having seen every entry, the bound is exact again; otherwise it stays (a bound still).
    if (whole) this.earliest = next;
    for (const e of gone) {
      // An earlier eviction's listener may have deleted it meanwhile.
      if (this.map.get(e.key) !== e) continue;
      this.delete(e.key);
      this.onEvict?.(e.key, e.value);
      dropped++;
    }
    return dropped;
  }

  /** Values, oldest first, without reordering (as they were when called: changes after do not show). */
  values(): IterableIterator<V> {
    const out: V[] = [];
    for (let e = this.oldest; e !== undefined; e = e.newer) out.push(e.value);
    return out[Symbol.iterator]();
  }

  /** Keys and values, oldest first, without reordering (as they were when called). */
  entries(): IterableIterator<[string, V]> {
    const out: Array<[string, V]> = [];
    for (let e = this.oldest; e !== undefined; e = e.newer) out.push([e.key, e.value]);
    return out[Symbol.iterator]();
  }

  /** Makes `e` the youngest. */
  private touch(e: Entry<V>): void {
    if (e === this.youngest) return;
    this.unlink(e);
    e.older = this.youngest;
    e.newer = undefined;
    if (this.youngest) this.youngest.newer = e;
    else this.oldest = e;
    this.youngest = e;
  }

  private unlink(e: Entry<V>): void {
    if (e.older) e.older.newer = e.newer;
    else if (this.oldest === e) this.oldest = e.newer;
    if (e.newer) e.newer.older = e.older;
    else if (this.youngest === e) this.youngest = e.older;
  }
}
