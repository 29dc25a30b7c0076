// The marker line a capture file carries for exchanges the writer could not capture (its queue was full,
// a record was larger than --max-mb, the disk refused a write): how many, and when. Never a record itself.

/** One marker: exchanges not captured between `from` and `to` (ms since the epoch, the proxy's clock). */
export interface NotCapturedMarker {
  cacheward: 'not_captured';
  /** Unique per marker, so a file read twice (or copied into another folder) counts it once. */
  id: string;
  /** `dropped` + `failed`. */
  exchanges: number;
  /** Not queued: the queue was full (a burst faster than the disk), or the record was larger than --max-mb. */
  dropped: number;
  /** Queued, but the write failed (a full or failing disk). */
  failed: number;
  from: number;
  to: number;
}

/** Whether a parsed line is a marker (an older reader skips it as "not a capture record", with a warning). */
export function isNotCaptured(v: unknown): v is NotCapturedMarker {
  const m = v as Partial<NotCapturedMarker> | null;
  return (
    m !== null &&
    typeof m === 'object' &&
    m.cacheward === 'not_captured' &&
    typeof m.id === 'string' &&
    Number.isInteger(m.exchanges) &&
    (m.exchanges as number) >= 0
  );
}

/** Counts exchanges not captured until a marker for them is on disk. */
export class NotCapturedTally {
  private dropped = 0;
  private failed = 0;
  private from = 0;
  private to = 0;
  private seq = 0;

  constructor(private readonly idPrefix: string) {}

  /** Exchanges counted and not yet in a marker on disk. */
  get count(): number {
    return this.dropped + this.failed;
  }

  get pending(): boolean {
    return this.dropped + this.failed > 0;
  }

  add(kind: 'dropped' | 'failed', n: number, now: number): void {
    if (n <= 0) return;
    if (!this.pending) this.from = now;
    this[kind] += n;
    this.to = Math.max(this.to, now);
  }

  /** The marker for everything counted so far, which is then no longer pending (see {@link restore}). */
  take(): NotCapturedMarker | undefined {
    if (!this.pending) return undefined;
    const m: NotCapturedMarker = {
      cacheward: 'not_captured',
      id: `${this.idPrefix}-${++this.seq}`,
      exchanges: this.dropped + this.failed,
      dropped: this.dropped,
      failed: this.failed,
      from: this.from,
      to: this.to,
    };
    this.dropped = 0;
    this.failed = 0;
    return m;
  }

  /** A taken marker whose write failed: its counts are pending again. */
  restore(m: NotCapturedMarker): void {
    const wasPending = this.pending;
    this.dropped += m.dropped;
    this.failed += m.failed;
    this.from = wasPending ? Math.min(this.from, m.from) : m.from;
    this.to = Math.max(this.to, m.to);
  }
}
