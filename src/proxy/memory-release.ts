// Gives memory back to the system once traffic is over: after a body of many megabytes, and when a proxy that
// V8 left holding far more heap than is live has been idle for 30 s. Never more than every 10 s, never while an
// exchange is open (a full collection holds the event loop for hundreds of ms; a compacting one longer).

import { getHeapStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/** Bodies from this size on are followed by a collection (8 MB). */
export const LARGE_BODY_BYTES = 8 * 1024 * 1024;

/** Committed heap this much over the live heap (and at least half of it again) is worth compacting away. */
export const SLACK_HEAP_BYTES = 64 * 1024 * 1024;

/** A full collection; `compact` moves every live object off its page so emptied pages go back. */
export type Collect = (compact: boolean) => void;

let exposed: (() => void) | undefined;

/** V8's own collector: the exposed `gc` if the process has one, else exposed for this call only. */
function collector(): (() => void) | undefined {
  if (exposed) return exposed;
  const global = (globalThis as { gc?: () => void }).gc;
  if (typeof global === 'function') exposed = global;
  else {
    try {
      setFlagsFromString('--expose-gc');
      exposed = runInNewContext('gc') as () => void;
    } catch {
      return undefined;
    }
  }
  return exposed;
}

/**
 * V8's full collection, compacting or not. V8's own full collections move objects off only the few pages
 * they pick, so a heap whose bounded caches died scattered over hundreds of pages keeps them all committed
 * long after. Compacting costs more than a plain collection (it copies every live object).
 */
export function fullCollect(compact: boolean): void {
  const collect = collector();
  if (!collect) return;
  if (!compact) {
    collect();
    return;
  }
  setFlagsFromString('--compact-on-every-full-gc');
  try {
    collect();
  } finally {
    setFlagsFromString('--no-compact-on-every-full-gc');
  }
}

/** The heap V8 has committed and the part of it in use, in bytes. */
export interface HeapFigures {
  committed: number;
  used: number;
}

function heapFigures(): HeapFigures {
  const h = getHeapStatistics();
  return { committed: h.total_heap_size, used: h.used_heap_size };
}

/** Whether compacting would give back enough to be worth its pause. */
export function worthCompacting({ committed, used }: HeapFigures): boolean {
  const slack = committed - used;
  return slack >= SLACK_HEAP_BYTES && slack * 2 >= used;
}

export interface MemoryReleaseOptions {
  /** Resolves once what holds a large body (the capture queue) has let go of it. */
  settled?: () => Promise<void>;
  /** Whether an exchange is open or after-response work is queued: a collection waits until it is not. */
  busy?: () => boolean;
  /** How long the proxy must have been quiet after a large body (ms, default 1,000). */
  quietMs?: number;
  /** How long without an exchange ending makes the proxy idle (ms, default 30,000). */
  idleMs?: number;
  /** The least time between two collections (ms, default 10,000). */
  minGapMs?: number;
  /** The heap's figures (default V8's); and the collection to run (default {@link fullCollect}). */
  heap?: () => HeapFigures;
  collect?: Collect;
}

/**
 * Why this exists: V8 frees a finished large body only at its next major collection, and an idle proxy
 * allocates too little to trigger one, so its RSS stays far above normal for minutes. A busy proxy
 * allocates enough for V8's own (incremental) collections, but those leave committed the pages that dead
 * objects were scattered over, and V8's memory reducer does not give them back either. While `busy()`
 * says an exchange is open, a forced collection waits (its pause would stall another client's stream);
 * the idle one waits 30 s, so a request seldom meets its pause. The process owner's choice
 * (`releaseMemory`): the CLI turns it on, a library user's process keeps its own collector.
 */
export class MemoryRelease implements MemoryHooks {
  private timer: NodeJS.Timeout | undefined;
  /** The check for idleness, armed while exchanges end. */
  private idleTimer: NodeJS.Timeout | undefined;
  private ended = 0;
  private endedAtCheck = 0;
  /** A large body's collection is on its way (waiting for the capture queue or for quiet). */
  private largePending = false;
  private stopped = false;
  private last = Number.NEGATIVE_INFINITY;
  private readonly settled: () => Promise<void>;
  private readonly busy: () => boolean;
  private readonly quietMs: number;
  private readonly idleMs: number;
  private readonly minGapMs: number;
  private readonly heap: () => HeapFigures;
  private readonly collect: Collect;
  /** How many collections this has run, and how long the longest held the event loop (ms). */
  collections = 0;
  longestMs = 0;

  constructor(options: MemoryReleaseOptions = {}) {
    this.settled = options.settled ?? (async () => {});
    this.busy = options.busy ?? (() => false);
    this.quietMs = options.quietMs ?? 1_000;
    this.idleMs = options.idleMs ?? 30_000;
    this.minGapMs = options.minGapMs ?? 10_000;
    this.heap = options.heap ?? heapFigures;
    this.collect = options.collect ?? fullCollect;
  }

  /** A large body's exchange ended: collect once things are quiet (compacting if worth it). */
  afterLargeBody(bytes: number): void {
    if (bytes < LARGE_BODY_BYTES || this.stopped) return;
    // One on its way already (a later body's memory goes with it, or with the next one 10 s on).
    if (this.largePending) return;
    this.largePending = true;
    const wait = Math.max(this.quietMs, this.last + this.minGapMs - Date.now());
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.settled()
        .catch(() => {})
        .then(() =>
          this.whenQuiet(() => {
            this.run(worthCompacting(this.heap()));
            // Buffers freed by the first collection's finalizers are returned by a second one.
            this.timer = setTimeout(() => {
              this.timer = undefined;
              this.whenQuiet(() => {
                this.largePending = false;
                this.run(false, true);
              });
            }, 2_000);
            this.timer.unref();
          }),
        );
    }, wait);
    this.timer.unref();
  }

  /**
   * An exchange ended. O(1): it counts, and arms one check (every `idleMs`) that sees whether any exchange
   * ended since the last; once none has, the proxy is idle and, if V8 holds much more heap than is live,
   * one compacting collection gives it back.
   */
  afterExchange(): void {
    this.ended++;
    if (!this.idleTimer && !this.stopped) this.armIdleCheck();
  }

  private armIdleCheck(): void {
    this.idleTimer = setTimeout(() => {
      this.idleTimer = undefined;
      if (this.ended !== this.endedAtCheck || this.busy()) {
        this.endedAtCheck = this.ended;
        this.armIdleCheck();
        return;
      }
      // A large body's collection is on its way, or one ran not long ago.
      if (this.largePending || Date.now() - this.last < this.minGapMs) return;
      if (worthCompacting(this.heap())) this.run(true);
    }, this.idleMs);
    this.idleTimer.unref();
  }

  /** One collection, unless stopped or (but for a large body's second one) one ran within `minGapMs`. */
  private run(compact: boolean, second = false): void {
    if (this.stopped || (!second && Date.now() - this.last < this.minGapMs)) return;
    const start = performance.now();
    this.collect(compact);
    this.longestMs = Math.max(this.longestMs, performance.now() - start);
    this.last = Date.now();
    this.collections++;
  }

  /** Runs `collect` now if no exchange is open, else checks again every `quietMs`. */
  private whenQuiet(collect: () => void): void {
    if (this.stopped) return;
    if (!this.busy()) {
      collect();
      return;
    }
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.whenQuiet(collect);
    }, this.quietMs);
    this.timer.unref();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.timer = undefined;
    this.idleTimer = undefined;
  }
}

/** What an exchange's end tells about memory: a {@link MemoryRelease}, or nothing when the proxy runs none. */
export interface MemoryHooks {
  afterLargeBody(bytes: number): void;
  afterExchange(): void;
  readonly collections: number;
  readonly longestMs: number;
  stop(): void;
}

/** The hooks of a proxy that leaves collection to V8 (the library's default). */
export const NO_RELEASE: MemoryHooks = {
  afterLargeBody: () => {},
  afterExchange: () => {},
  collections: 0,
  longestMs: 0,
  stop: () => {},
};

/** What `/_cacheward/health` says about memory: the process's, and the state's size against its bound. */
export interface ProcessMemory {
  rss: number;
  heapUsed: number;
  heapTotal: number;
  external: number;
  arrayBuffers: number;
  /** Conversations and requests the state holds now (each bounded, least recently used go first). */
  conversations: number;
  requests: number;
  /** Collections the proxy has run to give memory back (after large bodies and bursts), and the longest (ms). */
  collections: number;
  collectionMaxMs: number;
}

export function processMemory(
  sizes: { conversations: number; requests: number },
  release: { collections: number; longestMs: number },
): ProcessMemory {
  const m = process.memoryUsage();
  return {
    rss: m.rss,
    heapUsed: m.heapUsed,
    heapTotal: m.heapTotal,
    external: m.external,
    arrayBuffers: m.arrayBuffers,
    conversations: sizes.conversations,
    requests: sizes.requests,
    collections: release.collections,
    collectionMaxMs: Math.round(release.longestMs),
  };
}
