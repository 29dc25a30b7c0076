// Gives memory back to the system once traffic is over: after a body of many megabytes, or after a burst that
// left V8 holding far more heap than is live, one compacting collection once the proxy is quiet. Never more than
// every 10 s, and never while an exchange is open (a full collection holds the event loop for up to ~100 ms).

import { getHeapStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/** Bodies from this size on are followed by a collection (8 MB). */
export const LARGE_BODY_BYTES = 8 * 1024 * 1024;

/** After a burst, committed heap this much over the live heap (and at least half of it again) is given back. */
export const SLACK_HEAP_BYTES = 64 * 1024 * 1024;

type Collect = () => void;

let exposed: Collect | undefined;

/** V8's own collector: the exposed `gc` if the process has one, else exposed for this call only. */
function collector(): Collect | undefined {
  if (exposed) return exposed;
  const global = (globalThis as { gc?: Collect }).gc;
  if (typeof global === 'function') exposed = global;
  else {
    try {
      setFlagsFromString('--expose-gc');
      exposed = runInNewContext('gc') as Collect;
    } catch {
      return undefined;
    }
  }
  return exposed;
}

/**
 * A full collection that also compacts every page. V8's own full collections move objects off only the few
 * pages it picks, so a heap whose bounded caches died scattered over hundreds of pages keeps them all
 * committed (at 30,000 conversations: 241 MB committed for 100 MB live; compacted, 134 MB).
 */
export function compactingCollect(): void {
  const collect = collector();
  if (!collect) return;
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

export interface MemoryReleaseOptions {
  /** Resolves once what holds a large body (the capture queue) has let go of it. */
  settled?: () => Promise<void>;
  /** Whether an exchange is open or after-response work is queued: a collection waits until it is not. */
  busy?: () => boolean;
  /** How long the proxy must have been quiet (ms, default 1,000; a burst's end is checked at twice this). */
  quietMs?: number;
  /** The least time between two collections (ms, default 10,000). */
  minGapMs?: number;
  /** The heap's figures (default V8's); and the collection to run (default {@link compactingCollect}). */
  heap?: () => HeapFigures;
  collect?: Collect;
}

/**
 * Why this exists: V8 frees a finished 40 MB body only at its next major collection, and an idle proxy
 * allocates too little to trigger one, so its RSS stayed hundreds of MB above normal for minutes. A busy
 * proxy allocates enough for V8's own (incremental) collections, but those leave the pages that a burst's
 * dead objects were scattered over committed. While `busy()` says an exchange is open, the forced collection
 * waits (it stalled another client's stream for 180-440 ms after a 100,000-message body).
 */
export class MemoryRelease {
  private timer: NodeJS.Timeout | undefined;
  /** The check for a burst's end, armed while exchanges end. */
  private burstTimer: NodeJS.Timeout | undefined;
  private ended = 0;
  private endedAtCheck = 0;
  private last = Number.NEGATIVE_INFINITY;
  private readonly settled: () => Promise<void>;
  private readonly busy: () => boolean;
  private readonly quietMs: number;
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
    this.minGapMs = options.minGapMs ?? 10_000;
    this.heap = options.heap ?? heapFigures;
    this.collect = options.collect ?? compactingCollect;
  }

  /** A large body's exchange ended: collect once things are quiet. */
  afterLargeBody(bytes: number): void {
    if (bytes < LARGE_BODY_BYTES) return;
    if (this.timer) clearTimeout(this.timer);
    const wait = Math.max(this.quietMs, this.last + this.minGapMs - Date.now());
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.settled()
        .catch(() => {})
        .then(() =>
          this.whenQuiet(() => {
            this.run();
            // Buffers freed by the first collection's finalizers are returned by a second one.
            this.timer = setTimeout(() => {
              this.timer = undefined;
              this.whenQuiet(() => this.run());
            }, 2_000);
            this.timer.unref();
          }),
        );
    }, wait);
    this.timer.unref();
  }

  /**
   * An exchange ended. O(1): it counts, and arms one check (every 2 × `quietMs`) that sees whether any
   * exchange ended since the last; once none has, the burst is over and, if V8 holds much more heap than is
   * live, one compacting collection gives it back.
   */
  afterExchange(): void {
    this.ended++;
    if (!this.burstTimer) this.armBurstCheck();
  }

  private armBurstCheck(): void {
    this.burstTimer = setTimeout(() => {
      this.burstTimer = undefined;
      if (this.ended !== this.endedAtCheck || this.busy()) {
        this.endedAtCheck = this.ended;
        this.armBurstCheck();
        return;
      }
      // A large body's own collection is on its way: it will do.
      if (this.timer) return;
      if (Date.now() - this.last < this.minGapMs) return;
      const { committed, used } = this.heap();
      const slack = committed - used;
      if (slack >= SLACK_HEAP_BYTES && slack * 2 >= used) this.run();
    }, 2 * this.quietMs);
    this.burstTimer.unref();
  }

  private run(): void {
    const start = performance.now();
    this.collect();
    this.longestMs = Math.max(this.longestMs, performance.now() - start);
    this.last = Date.now();
    this.collections++;
  }

  /** Runs `collect` now if no exchange is open, else checks again every `quietMs`. */
  private whenQuiet(collect: () => void): void {
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
    if (this.timer) clearTimeout(this.timer);
    if (this.burstTimer) clearTimeout(this.burstTimer);
    this.timer = undefined;
    this.burstTimer = undefined;
  }
}

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
