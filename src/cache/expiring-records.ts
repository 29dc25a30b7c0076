// A bounded map of records that expire: what both providers' diagnostics keep per response id.
// Times are passed in; the oldest record goes first past the bound.

export class ExpiringRecords<T> {
  private readonly records = new Map<string, { value: T; expiresAt: number }>();

  constructor(
    private readonly retentionMs: number,
    private readonly max: number,
  ) {}

  set(id: string, value: T, now: number): void {
    this.records.set(id, { value, expiresAt: now + this.retentionMs });
    if (this.records.size > this.max) {
      const oldest = this.records.keys().next().value;
      if (oldest !== undefined) this.records.delete(oldest);
    }
  }

  /** The record, unless it is unknown or expired at `now`. */
  get(id: string, now: number): T | undefined {
    const r = this.records.get(id);
    return r && r.expiresAt > now ? r.value : undefined;
  }

  clear(): void {
    this.records.clear();
  }
}
