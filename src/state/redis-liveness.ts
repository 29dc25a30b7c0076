// Tells a Redis that is slow (a busy machine: it still answers, late) from one that is out (its connection
// down, silent past a limit that follows the round trips it measures, or out of memory), and counts each
// outage once, with one line when it starts and one when it ends. It never judges by a timer alone: a
// reply already waiting in the socket is heard before Redis counts as silent.

/** What a wait returns when Redis is out: the request cannot have its state. */
export const OUT = Symbol('out');

/**
 * `down`: the connection is closed or refused; `silent`: connected, but nothing came back for longer than
 * the limit (paused, stopped, a script that never ends); `oom`: it answers, but refuses writes (maxmemory
 * with noeviction); `error`: it answered a read with an error.
 */
export type OutageKind = 'down' | 'silent' | 'oom' | 'error';

export interface Outage {
  kind: OutageKind;
  at: number;
  reason: string;
}

export interface RedisLivenessOptions {
  /** The least time Redis may stay silent while the proxy waits for it before it counts as out (ms). */
  limitMs: number;
  /** What the limit may grow to when round trips are slow (ms). Default the larger of `limitMs` and 5 s. */
  maxLimitMs?: number;
  /** Redis's address as it may be shown (no credentials). */
  display: string;
  log: (line: string) => void;
}

/** Round trips remembered, and how many of the slowest of them Redis may take, silent, before it is out. */
const SAMPLES = 128;
const ROUND_TRIPS = 10;

export class RedisLiveness {
  private lastReply = 0;
  private readonly rtts: number[] = [];
  private nextSample = 0;
  private limit: number | undefined;
  private current: Outage | undefined;
  private readonly waiters = new Set<() => void>();
  private readonly maxLimit: number;
  outages = 0;
  lastFailure: { at: number; reason: string } | undefined;
  recoveredAt: number | undefined;
  /** Turns the shared state could not record during the current out-of-memory outage. */
  unrecorded = 0;
  /** Requests that went out as the client sent them during the current outage (the state could not be had). */
  unfixed = 0;

  constructor(private readonly options: RedisLivenessOptions) {
    this.maxLimit = Math.max(options.limitMs, options.maxLimitMs ?? 5_000);
  }

  /** The outage under way, if any. */
  get outage(): Outage | undefined {
    return this.current;
  }

  /** Whether a request should not even ask: the connection is down, or Redis has gone silent. */
  get unreachable(): boolean {
    return this.current?.kind === 'down' || this.current?.kind === 'silent';
  }

  /**
   * How long Redis may stay silent before it counts as out: the configured least, or ten of its slowest
   * recent round trips (p99) when they are slower — a busy machine answers late, and that is not an outage.
   */
  limitMs(): number {
    if (this.limit !== undefined) return this.limit;
    const sorted = [...this.rtts].sort((x, y) => x - y);
    const p99 = sorted.length ? (sorted[Math.floor((sorted.length - 1) * 0.99)] as number) : 0;
    this.limit = Math.min(Math.max(this.options.limitMs, ROUND_TRIPS * p99), this.maxLimit);
    return this.limit;
  }

  /**
   * A command, watched: its reply is Redis answering (a round trip measured), an error reply too (an
   * out-of-memory refusal starts that outage); a closed connection or a timeout is no answer.
   */
  watch<T>(command: Promise<T>): Promise<T> {
    const sent = Date.now();
    return command.then(
      (value) => {
        this.answered(Date.now() - sent, true);
        return value;
      },
      (err: Error) => {
        if (err?.name === 'ReplyError') {
          this.answered(Date.now() - sent, false);
          if (/\bOOM\b/.test(err.message))
            this.begin(
              'oom',
              `Redis at ${this.options.display} is out of memory: ${err.message.split('. script:')[0]}`,
            );
        }
        throw err;
      },
    );
  }

  /** A write went through: an out-of-memory outage is over. */
  wrote(): void {
    if (this.current?.kind === 'oom') this.end();
  }

  /** The connection is ready again. */
  ready(): void {
    if (this.current?.kind === 'down') this.end();
  }

  /**
   * `work` (which never rejects), or {@link OUT} once Redis is out: it is unreachable already, its connection
   * drops, or it has sent nothing back for {@link limitMs} since `sent` (or its last reply, whichever is later).
   */
  wait<T>(work: Promise<T>, sent: number): Promise<T | typeof OUT> {
    if (this.unreachable) return Promise.resolve(OUT);
    return new Promise((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const out = () => settle(OUT);
      function settle(v: T | typeof OUT) {
        if (timer) clearTimeout(timer);
        resolve(v);
      }
      const waiters = this.waiters;
      waiters.add(out);
      work.then(
        (v) => {
          if (waiters.delete(out)) settle(v);
        },
        () => {
          if (waiters.delete(out)) settle(OUT);
        },
      );
      const look = () => {
        timer = undefined;
        // Judged after the I/O that is waiting: a process starved of CPU wakes with its timers due and
        // Redis's reply unread in the socket, and that reply is not silence.
        setImmediate(() => {
          if (!waiters.has(out)) return;
          const silent = Date.now() - Math.max(sent, this.lastReply);
          const limit = this.limitMs();
          if (silent >= limit)
            this.begin('silent', `Redis at ${this.options.display} sent nothing back for ${silent} ms`);
          else {
            timer = setTimeout(look, limit - silent);
            timer.unref();
          }
        });
      };
      timer = setTimeout(look, this.limitMs());
      timer.unref();
    });
  }

  /** Lets pending I/O in, then says whether Redis is still unreachable (a reply may have just come). */
  async stillUnreachable(): Promise<boolean> {
    if (!this.unreachable) return false;
    await new Promise((r) => setImmediate(r));
    return this.unreachable;
  }

  /** Starts an outage (a second cause while one is under way only changes its kind). */
  begin(kind: OutageKind, reason: string): void {
    const now = Date.now();
    this.lastFailure = { at: now, reason };
    if (kind === 'down' || kind === 'silent') {
      for (const w of [...this.waiters]) {
        this.waiters.delete(w);
        w();
      }
    }
    if (this.current) {
      // Unreachable outranks the rest: it is what decides whether requests ask at all.
      if (kind === 'down' || kind === 'silent' || this.current.kind === 'error')
        this.current = { ...this.current, kind, reason };
      return;
    }
    this.current = { kind, at: now, reason };
    this.outages++;
    this.unrecorded = 0;
    this.unfixed = 0;
    this.options.log(
      kind === 'oom'
        ? `state degraded: ${reason}; requests are still fixed from the state it holds, but new turns are not recorded until it has room`
        : `state degraded (requests go out as the client sent them until it answers; nothing is lost): ${reason}`,
    );
  }

  private answered(rtt: number, ok: boolean): void {
    this.lastReply = Date.now();
    if (this.rtts.length < SAMPLES) this.rtts.push(rtt);
    else this.rtts[this.nextSample] = rtt;
    this.nextSample = (this.nextSample + 1) % SAMPLES;
    this.limit = undefined;
    if (ok && (this.current?.kind === 'silent' || this.current?.kind === 'error')) this.end();
  }

  private end(): void {
    const o = this.current;
    if (!o) return;
    this.current = undefined;
    this.recoveredAt = Date.now();
    const after = ((this.recoveredAt - o.at) / 1000).toFixed(1);
    this.options.log(
      o.kind === 'oom'
        ? `state: Redis at ${this.options.display} takes writes again after ${after} s (${this.unrecorded} turns were not recorded meanwhile)`
        : `state: Redis at ${this.options.display} answers again after ${after} s (${this.unfixed} request${this.unfixed === 1 ? '' : 's'} went out unfixed meanwhile)`,
    );
  }
}
