// A map bounded by entry count and, optionally, by age: reads and writes make a key the youngest; past the
// cap the oldest go, and `prune(now)` drops entries whose expiry has passed. Pure: time is a parameter.

export class LruMap<V> {
  private readonly map = new Map<string, V>();
  /** Expiry (ms since the epoch) of entries set with one. */
  private readonly expiry = new Map<string, number>();
  /**
   * The key written or read last: touching it again changes no order, so it is not moved (a move is a
   * delete and an insert, and each leaves a hole that makes the Map copy its whole table once enough pile up).
   */
  private youngest: string | undefined;
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
    const v = this.map.get(k);
    if (v !== undefined && k !== this.youngest) {
      this.map.delete(k);
      this.map.set(k, v);
      this.youngest = k;
    }
    return v;
  }

  /** Sets `k`, the youngest now; with `expiresAt`, {@link prune} drops it once that time has passed. */
  set(k: string, v: V, expiresAt?: number): void {
    if (k !== this.youngest || !this.map.has(k)) this.map.delete(k);
    this.map.set(k, v);
    this.youngest = k;
    if (expiresAt !== undefined) {
      this.expiry.set(k, expiresAt);
      if (expiresAt < this.earliest) this.earliest = expiresAt;
    } else this.expiry.delete(k);
    while (this.map.size > this.max) {
      const oldest = this.map.entries().next().value;
      if (oldest === undefined) break;
      this.delete(oldest[0]);
      this.onEvict?.(oldest[0], oldest[1]);
    }
  }

  /** The value at `k` without making it the youngest. */
  peek(k: string): V | undefined {
    return this.map.get(k);
  }

  delete(k: string): void {
    this.map.delete(k);
    this.expiry.delete(k);
    if (k === this.youngest) this.youngest = undefined;
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
    const gone: string[] = [];
    for (const k of this.map.keys()) {
      const exp = this.expiry.get(k);
      if (exp !== undefined && exp <= now) gone.push(k);
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
    for (const k of gone) {
      const v = this.map.get(k) as V;
      this.delete(k);
      this.onEvict?.(k, v);
      dropped++;
    }
    return dropped;
  }

  /** Values, oldest first, without reordering. */
  values(): IterableIterator<V> {
    return this.map.values();
  }

  entries(): IterableIterator<[string, V]> {
    return this.map.entries();
  }
}
