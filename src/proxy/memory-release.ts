// Gives the memory of a large request back to the system once it is over: after a body of many megabytes, full
// garbage collections once its capture record is written and the proxy is quiet. Never more than every 10 s, and
// never while an exchange is open (a full collection holds the event loop for hundreds of ms).

import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/** Bodies from this size on are followed by a collection (8 MB). */
export const LARGE_BODY_BYTES = 8 * 1024 * 1024;

type Collect = () => void;

let collect: Collect | undefined;

/** V8's own collector: the exposed `gc` if the process has one, else exposed for this call only. */
function collector(): Collect | undefined {
  if (collect) return collect;
  const exposed = (globalThis as { gc?: Collect }).gc;
  if (typeof exposed === 'function') collect = exposed;
  else {
    try {
      setFlagsFromString('--expose-gc');
      collect = runInNewContext('gc') as Collect;
    } catch {
      return undefined;
    }
  }
  return collect;
}

/**
 * Why this exists: V8 frees a finished 40 MB body only at its next major collection, and an idle proxy
 * allocates too little to trigger one, so its RSS stayed hundreds of MB above normal for minutes. A busy
 * proxy allocates enough for V8's own (incremental) collections: while `busy()` says an exchange is open,
 * the forced one waits (it stalled another client's stream for 180-440 ms after a 100,000-message body).
 */
export class MemoryRelease {
  private timer: NodeJS.Timeout | undefined;
  private last = 0;

  /** `settled` resolves once what holds the body (the capture queue) has let go of it. */
  constructor(
    private readonly settled: () => Promise<void> = async () => {},
    private readonly busy: () => boolean = () => false,
    private readonly quietMs = 1_000,
    private readonly minGapMs = 10_000,
  ) {}

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
            this.last = Date.now();
            collector()?.();
            // Buffers freed by the first collection's finalizers are returned by a second one.
            this.timer = setTimeout(() => {
              this.timer = undefined;
              this.whenQuiet(() => collector()?.());
            }, 2_000);
            this.timer.unref();
          }),
        );
    }, wait);
    this.timer.unref();
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
    this.timer = undefined;
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
}

export function processMemory(sizes: { conversations: number; requests: number }): ProcessMemory {
  const m = process.memoryUsage();
  return {
    rss: m.rss,
    heapUsed: m.heapUsed,
    heapTotal: m.heapTotal,
    external: m.external,
    arrayBuffers: m.arrayBuffers,
    conversations: sizes.conversations,
    requests: sizes.requests,
  };
}
