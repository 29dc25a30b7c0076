// A bounded map of records that expire: what both providers' diagnostics keep per response id.
// Times are passed in (it never reads a clock); the oldest record goes first past the bound.

export class ExpiringRecords<T> {
  private readonly records = new Map<string, { value: T; expiresAt: number }>();
  /**
   * Walks the keys oldest first as they are dropped, and stays where it is between drops: a Map iterator
   * goes on past entries deleted or added since, so it always stands at the oldest left. A new iterator
   * for each drop would walk over every deleted slot before it again (until V8 rebuilds the table).
   */
  private oldest: Iterator<string> | undefined;

  constructor(
    private readonly retentionMs: number,
    private readonly max: number,
  ) {}

  set(id: string, value: T, now: number): void {
    this.records.set(id, { value, expiresAt: now + this.retentionMs });
    if (this.records.size > this.max) {
      this.oldest ??= this.records.keys();
      const oldest = this.oldest.next();
      if (!oldest.done) this.records.delete(oldest.value);
    }
  }

  /** The record, unless it is unknown or expired at `now`. */
  get(id: string, now: number): T | undefined {
    const r = this.records.get(id);
    return r && r.expiresAt > now ? r.value : undefined;
  }

  clear(): void {
    this.records.clear();
    this.oldest = undefined;
  }
}
