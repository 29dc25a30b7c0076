// Sets the V8 heap behaviour a proxy process runs best with (its own process: `cacheward proxy`, `run`).
// Never called by createProxy itself: a library user's process keeps the flags its owner chose.

import { applyHeapFlags } from '../core/heap-flags.js';

/**
 * The flag, and why. A proxy's heap is mostly long-lived bounded state (the kept bodies' scans, the
 * conversations, the fix state: 40-200 MB live) that grows slowly, so V8's dynamic growing factor stays
 * near its minimum and the old generation's limit ends barely above the live heap plus the reserve V8 keeps
 * for the young generation: incremental marking restarted after every ~2 MB promoted, a full collection
 * (30-35 ms of CPU over a 43 MB heap) every 5-10 requests of a 1 MB conversation. A fixed factor of 2
 * leaves room for tens of MB between collections. Measured by bench/proxy-fixes.ts (CPU per request) and
 * bench/memory.ts (RSS), alternated with the build without it; the figures are in the README.
 */
export const PROXY_HEAP_FLAGS: readonly string[] = ['--heap-growing-percent=100'];

/** Applies {@link PROXY_HEAP_FLAGS} to this process, once; V8 reads it at each collection. */
export function tuneHeapForProxy(): void {
  applyHeapFlags(PROXY_HEAP_FLAGS);
}
