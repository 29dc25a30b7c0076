// A map bounded by entry count: reads and writes make a key the youngest; past the cap the oldest go.
// Pure data structure; it never reads a clock and never does I/O.

export class LruMap<V> {
  private readonly map = new Map<string, V>();
  constructor(readonly max: number) {}

  get size(): number {
    return this.map.size;
  }

  get(k: string): V | undefined {
    const v = this.map.get(k);
    if (v !== undefined) {
      this.map.delete(k);
      this.map.set(k, v);
    }
    return v;
  }

  set(k: string, v: V): void {
    this.map.delete(k);
    this.map.set(k, v);
    while (this.map.size > this.max) {
      const oldest = this.map.keys().next().value;
      if (oldest === undefined) break;
      this.map.delete(oldest);
    }
  }

  delete(k: string): void {
    this.map.delete(k);
  }

  /** Values, oldest first, without reordering. */
  values(): IterableIterator<V> {
    return this.map.values();
  }

  entries(): IterableIterator<[string, V]> {
    return this.map.entries();
  }
}
