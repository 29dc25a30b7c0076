// Time as a value passed in: the Clock every component takes, and a VirtualClock tests can move by hand.
// Only shells construct a real clock; the pure core never calls Date.now itself.

import { CachewardError } from './errors.js';
/** Milliseconds since the Unix epoch, on demand. */
export interface Clock {
  now(): number;
}

/** A clock that can be moved forward: a virtual clock, or real time with an added offset. */
export interface AdvanceableClock extends Clock {
  advance(ms: number): void;
}

/** A clock that only moves when told to. Share one between the simulator, the proxy and the analyzer. */
export class VirtualClock implements AdvanceableClock {
  private ms: number;
  constructor(startMs = Date.UTC(2026, 0, 1)) {
    this.ms = startMs;
  }
  now(): number {
    return this.ms;
  }
  advance(ms: number): void {
    if (!Number.isFinite(ms) || ms < 0)
      throw new CachewardError('CW_CLOCK', `advance takes a finite, non-negative ms, not ${ms}`);
    this.ms += ms;
  }
}

/** Real time, plus however far it has been advanced (the simulator's default: `/_sim/clock` moves it). */
export class OffsetClock implements AdvanceableClock {
  private offset = 0;
  now(): number {
    return Date.now() + this.offset;
  }
  advance(ms: number): void {
    if (!Number.isFinite(ms) || ms < 0)
      throw new CachewardError('CW_CLOCK', `advance takes a finite, non-negative ms, not ${ms}`);
    this.offset += ms;
  }
}
