// Runs the proxy's after-response work in slices: queued steps run back to back until a slice has used its
// budget (~4 ms), then the rest waits for the next turn of the event loop, so other clients' streams move.
// It never runs a step on the request path and never lets one step's failure reach another.

/** The upper bounds (ms) of the slice-length histogram: the 5 ms a slice should stay under among them. */
export const SLICE_BUCKETS_MS: readonly number[] = [1, 2, 5, 10, 20, 50, 100];

/**
 * A queue of synchronous steps run in slices of about `budgetMs` (a step is never cut in two); the time is
 * read here, in the shell, never by the steps.
 */
export class WorkSlices {
  /** A step that returns `true` has more to do: it goes to the back of the queue and runs again. */
  private readonly steps: Array<() => unknown> = [];
  private scheduled = false;
  /**
   * The longest slice so far and how many slices ran (for the benchmark and the tests); `longestCpuMs` is the
   * process CPU time used while that slice ran, when a CPU clock was given: far below its length, the
   * process was not running (another program had the core), not working.
   */
  readonly stats = { slices: 0, longestMs: 0, longestStepMs: 0, longestCpuMs: 0 };
  /**
   * How many slices took at most each of {@link SLICE_BUCKETS_MS} (cumulative, Prometheus style): a reader
   * that takes them before and after a stretch of traffic knows how many slices of that stretch alone went
   * past 5 ms (the longest above is since the start, the first cold requests included).
   */
  private readonly buckets = SLICE_BUCKETS_MS.map(() => 0);
  private totalMs = 0;

  constructor(
    private readonly budgetMs = 4,
    private readonly maxPending = 192,
    private readonly now: () => number = () => performance.now(),
    /**
     * The process's CPU time in ms, read at each slice's start and at the end of a new longest one (~1 µs a
     * read: off unless asked for, see {@link processCpuMs}); without it `longestCpuMs` stays 0.
     */
    private readonly cpuMs?: () => number,
  ) {}

  /** Runs `step` in a later slice; resolves with its result (or rejects with its error). */
  run<T>(step: () => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const f = () => {
        try {
          resolve(step());
        } catch (err) {
          reject(err);
        }
      };
      this.steps.push(f);
      this.schedule();
    });
  }

  /**
   * Runs a stepped computation (a generator that yields between bounded pieces of work) one piece per
   * step, going to the back of the queue between pieces: a huge body's parse is cut into slices with
   * other exchanges' steps between them. Resolves with its result (or rejects with its error).
   */
  stepped<T>(work: Generator<void, T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.steps.push(() => {
        try {
          const r = work.next();
          if (!r.done) return true;
          resolve(r.value);
        } catch (err) {
          reject(err);
        }
        return false;
      });
      this.schedule();
    });
  }

  /**
   * Runs `steps` one after another (a step that returns `true` has more to do and runs again before the
   * next one: a stepped parse, one piece at a time); between two of them other queued work may run. A step
   * that throws rejects the promise and the steps after it do not run.
   */
  series(steps: ReadonlyArray<() => unknown>): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (!steps.length) {
        resolve();
        return;
      }
      let i = 0;
      this.steps.push(() => {
        try {
          if ((steps[i] as () => unknown)() === true) return true;
        } catch (err) {
          reject(err);
          return false;
        }
        if (++i < steps.length) return true;
        resolve();
        return false;
      });
      this.schedule();
    });
  }

  /** Steps waiting for a slice. */
  get pending(): number {
    return this.steps.length;
  }

  /** Prometheus lines: how long after-response work held the event loop at most, and what waits. */
  metricsText(): string {
    return [
      '# HELP cacheward_after_response_slice_max_seconds Longest slice of after-response work (one event-loop hold).',
      '# TYPE cacheward_after_response_slice_max_seconds gauge',
      `cacheward_after_response_slice_max_seconds ${(this.stats.longestMs / 1000).toFixed(6)}`,
      '# HELP cacheward_after_response_slice_max_cpu_seconds Process CPU time used during that longest slice (far less: the process was preempted).',
      '# TYPE cacheward_after_response_slice_max_cpu_seconds gauge',
      `cacheward_after_response_slice_max_cpu_seconds ${(this.stats.longestCpuMs / 1000).toFixed(6)}`,
      '# HELP cacheward_after_response_slice_seconds Slices of after-response work by how long each held the event loop.',
      '# TYPE cacheward_after_response_slice_seconds histogram',
      ...SLICE_BUCKETS_MS.map(
        (le, i) => `cacheward_after_response_slice_seconds_bucket{le="${le / 1000}"} ${this.buckets[i]}`,
      ),
      `cacheward_after_response_slice_seconds_bucket{le="+Inf"} ${this.stats.slices}`,
      `cacheward_after_response_slice_seconds_sum ${(this.totalMs / 1000).toFixed(6)}`,
      `cacheward_after_response_slice_seconds_count ${this.stats.slices}`,
      '# HELP cacheward_after_response_step_max_seconds Longest single step (a parse, a record, an analysis).',
      '# TYPE cacheward_after_response_step_max_seconds gauge',
      `cacheward_after_response_step_max_seconds ${(this.stats.longestStepMs / 1000).toFixed(6)}`,
      '# HELP cacheward_after_response_pending Steps waiting for a slice.',
      '# TYPE cacheward_after_response_pending gauge',
      `cacheward_after_response_pending ${this.steps.length}`,
      '',
    ].join('\n');
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => this.slice());
  }

  private slice(): void {
    this.scheduled = false;
    const t0 = this.now();
    const c0 = this.cpuMs?.() ?? 0;
    let t = t0;
    // Past `maxPending` waiting steps (an overloaded proxy) a slice runs until the backlog is back under it:
    // the bodies those steps hold must not pile up without bound.
    while (this.steps.length && (t - t0 < this.budgetMs || this.steps.length > this.maxPending)) {
      const step = this.steps.shift() as () => unknown;
      const s = t;
      if (step() === true) this.steps.push(step);
      t = this.now();
      if (t - s > this.stats.longestStepMs) this.stats.longestStepMs = t - s;
    }
    this.stats.slices++;
    const ms = t - t0;
    this.totalMs += ms;
    for (let i = SLICE_BUCKETS_MS.length - 1; i >= 0 && ms <= (SLICE_BUCKETS_MS[i] as number); i--)
      (this.buckets[i] as number)++;
    if (t - t0 > this.stats.longestMs) {
      this.stats.longestMs = t - t0;
      this.stats.longestCpuMs = this.cpuMs ? this.cpuMs() - c0 : 0;
    }
    if (this.steps.length) this.schedule();
  }
}

/** The process's user and system CPU time in ms (for {@link WorkSlices}' `cpuMs`). */
export function processCpuMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}
