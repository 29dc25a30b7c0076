// A map bounded by entry count and, optionally, by age: reads and writes make a key the youngest; past the
// cap the oldest go, and `prune(now)` drops entries whose expiry has passed. Pure: time is a parameter.

const NONE = -1;

/**
 * The order lives in links between slots (two Int32Arrays), not in the Map's insertion order: making a key
 * the youngest relinks two slots and writes nothing to the Map. A move through the Map (a delete and an
 * insert) left a hole each time, and V8 copied the whole table once enough piled up (milliseconds in one
 * read of a large map); the oldest, found as the Map's first key, had every hole before it walked over
 * again at each eviction. Slots keep keys, values and expiries in flat arrays (no object per entry).
 */
export class LruMap<V> {
  /** Key to slot. */
  private readonly index = new Map<string, number>();
  private readonly keys: Array<string | undefined> = [];
  private readonly vals: Array<V | undefined> = [];
  private older: Int32Array = new Int32Array(8);
  private newer: Int32Array = new Int32Array(8);
  /** Expiry (ms since the epoch) per slot, NaN for none; made when the first entry with one is set. */
  private expiry: Float64Array | undefined;
  /** Slots never used yet start here; freed ones are chained through `newer` from `freed`. */
  private used = 0;
  private freed = NONE;
  private oldest = NONE;
  private youngest = NONE;
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
    return this.index.size;
  }

  get(k: string): V | undefined {
    const s = this.index.get(k);
    if (s === undefined) return undefined;
    const v = this.vals[s];
    if (v !== undefined) this.touch(s);
    return v;
  }

  /** Sets `k`, the youngest now; with `expiresAt`, {@link prune} drops it once that time has passed. */
  set(k: string, v: V, expiresAt?: number): void {
    let s = this.index.get(k);
    if (s !== undefined) {
      this.vals[s] = v;
      this.touch(s);
    } else {
      s = this.slot();
      this.keys[s] = k;
      this.vals[s] = v;
      this.older[s] = this.youngest;
      this.newer[s] = NONE;
      if (this.youngest !== NONE) this.newer[this.youngest] = s;
      else this.oldest = s;
      this.youngest = s;
      this.index.set(k, s);
    }
    if (expiresAt !== undefined) {
      this.expiry ??= new Float64Array(this.older.length).fill(Number.NaN);
      this.expiry[s] = expiresAt;
      if (expiresAt < this.earliest) this.earliest = expiresAt;
    } else if (this.expiry) this.expiry[s] = Number.NaN;
    while (this.index.size > this.max && this.oldest !== NONE) {
      const o = this.oldest;
      const key = this.keys[o] as string;
      const value = this.vals[o] as V;
      this.delete(key);
      this.onEvict?.(key, value);
    }
  }

  /** The oldest key and its value, without reordering. */
  first(): [string, V] | undefined {
    const o = this.oldest;
    return o === NONE ? undefined : [this.keys[o] as string, this.vals[o] as V];
  }

  /** The value at `k` without making it the youngest. */
  peek(k: string): V | undefined {
    const s = this.index.get(k);
    return s === undefined ? undefined : this.vals[s];
  }

  delete(k: string): void {
    const s = this.index.get(k);
    if (s === undefined) return;
    this.index.delete(k);
    this.unlink(s);
    // The slot lets go of what it held and waits for the next new key.
    this.keys[s] = undefined;
    this.vals[s] = undefined;
    this.newer[s] = this.freed;
    this.freed = s;
  }

  /**
   * Drops expired entries from the oldest end, looking past at most `patience` live ones (entries of longer
   * lifetimes may sit among them); returns how many went. Called on each write, it costs O(1) amortized.
   */
  prune(now: number, patience = 32): number {
    // Nothing can have expired yet: no walk (on a busy proxy, that is almost every call).
    if (now < this.earliest) return 0;
    const expiry = this.expiry;
    let dropped = 0;
    let live = 0;
    let whole = true;
    let next = Number.POSITIVE_INFINITY;
    const gone: string[] = [];
    for (let s = this.oldest; s !== NONE; s = this.newer[s] as number) {
      const exp = expiry ? (expiry[s] as number) : Number.NaN;
      if (exp <= now) gone.push(this.keys[s] as string);
      else {
        if (exp < next) next = exp;
        if (++live > patience) {
          whole = false;
          break;
        }
      }
    }
    // Having seen every entry, the bound is exact again; otherwise it stays (a bound still).
    if (whole) this.earliest = next;
    for (const k of gone) {
      // An earlier eviction's listener may have deleted it meanwhile, or set it again (to live on).
      const s = this.index.get(k);
      if (s === undefined || !((this.expiry?.[s] as number) <= now)) continue;
      const v = this.vals[s] as V;
      this.delete(k);
      this.onEvict?.(k, v);
      dropped++;
    }
    return dropped;
  }

  /** Values, oldest first, without reordering (as they were when called: changes after do not show). */
  values(): IterableIterator<V> {
    const out: V[] = [];
    for (let s = this.oldest; s !== NONE; s = this.newer[s] as number) out.push(this.vals[s] as V);
    return out[Symbol.iterator]();
  }

  /** Keys and values, oldest first, without reordering (as they were when called). */
  entries(): IterableIterator<[string, V]> {
    const out: Array<[string, V]> = [];
    for (let s = this.oldest; s !== NONE; s = this.newer[s] as number)
      out.push([this.keys[s] as string, this.vals[s] as V]);
    return out[Symbol.iterator]();
  }

  /** A free slot: a freed one, else the next never used (the link arrays grown to hold it). */
  private slot(): number {
    if (this.freed !== NONE) {
      const s = this.freed;
      this.freed = this.newer[s] as number;
      return s;
    }
    const s = this.used++;
    if (s >= this.older.length) {
      // Doubled, but never past what the cap can use (max + 1: one is set before the oldest goes).
      const size = Math.max(s + 1, Math.min(this.older.length * 2, this.max + 1));
      this.older = grown(this.older, size);
      this.newer = grown(this.newer, size);
      if (this.expiry) {
        const e = new Float64Array(size).fill(Number.NaN);
        e.set(this.expiry);
        this.expiry = e;
      }
    }
    return s;
  }

  /** Makes slot `s` the youngest. */
  private touch(s: number): void {
    if (s === this.youngest) return;
    this.unlink(s);
    this.older[s] = this.youngest;
    this.newer[s] = NONE;
    if (this.youngest !== NONE) this.newer[this.youngest] = s;
    else this.oldest = s;
    this.youngest = s;
  }

  private unlink(s: number): void {
    const o = this.older[s] as number;
    const n = this.newer[s] as number;
    if (o !== NONE) this.newer[o] = n;
    else this.oldest = n;
    if (n !== NONE) this.older[n] = o;
    else this.youngest = o;
  }
}

function grown(a: Int32Array, size: number): Int32Array {
  const b = new Int32Array(size);
  b.set(a);
  return b;
}
