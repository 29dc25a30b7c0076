// Sets the V8 heap behaviour a report process runs best with (its own process: `cacheward report`, `whatif`).
// Never called by the library's analysis itself, nor by a long-running command (the proxy keeps V8's defaults).

import { applyHeapFlags } from '../core/heap-flags.js';

/**
 * The flags, and why. An analysis promotes ~6.7 KB per record that is long-lived by design (recent
 * parents, the conversation model's nodes, each turn's blocks), so V8 grows its heap by its maximum factor
 * (4×) before each full collection: 55–60 MB live peaked at 364–400 MB at 100,000 requests. A fixed factor
 * (2) collects sooner (more full collections of a small heap, which cost less than the slack they
 * free), and without allocation-site pretenuring the short-lived objects of sites V8 guessed long-lived
 * die young instead of filling old space. Measured by bench/analyze.ts on the same captures, alternated.
 * The factor was 2.5 (`=150`) until the LruMap kept its order in slots (the report ran ~40% faster, and
 * its bounded stores cost ~24 bytes more an entry): a factor of 2 then peaks 23-28 MB lower on each of
 * the four large captures, agent and Claude Code layouts (2026-12-01 23:25, quiet, two alternated runs
 * each: 100,000 requests on Claude Code's layout 286-293 -> 263-265 MB), in the same time within noise.
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
