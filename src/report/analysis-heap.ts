// Sets the V8 heap behaviour a report process runs best with (its own process: `cacheward report`, `whatif`).
// Never called by the library's analysis itself, nor by a long-running command (the proxy keeps V8's defaults).

import { applyHeapFlags } from '../core/heap-flags.js';

/**
 * The flags, and why. An analysis promotes, for every record, objects that are long-lived by design
 * (recent parents, the conversation model's nodes, each turn's blocks), so V8 grows its heap by its maximum
 * factor before each full collection and the peak is several times the live heap. A fixed factor (2)
 * collects sooner (more full collections of a small heap, which cost less than the slack they free), and
 * without allocation-site pretenuring the short-lived objects of sites V8 guessed long-lived die young
 * instead of filling old space. Measured by bench/analyze.ts on the same captures, alternated: the
 * figures are in docs/performance.md, their history in git.
 */
export const ANALYSIS_HEAP_FLAGS: readonly string[] = [
  '--heap-growing-percent=100',
  '--no-allocation-site-pretenuring',
];

/**
 * Applies {@link ANALYSIS_HEAP_FLAGS} to this process, once. V8 reads both at each collection and each
 * allocation-site decision, so setting them before the analysis allocates takes effect (the bench's peak
 * RSS falls with them set this way exactly as with them on the command line).
 */
export function tuneHeapForAnalysis(): void {
  applyHeapFlags(ANALYSIS_HEAP_FLAGS);
}
