// The unit of stepped work: how much a stepped computation does between two yields, and running one to its
// end at once. Pure; it never schedules anything (core/stepped-work.ts is the shell's driver).

/** Work between two yields of a stepped scan or build: at most this many items, or about this many bytes. */
export const STEP_ITEMS = 256;
export const STEP_BYTES = 256 * 1024;

/** Runs a stepped computation to its end, at once (what the synchronous entry points do). */
export function drainSteps<T>(steps: Generator<void, T>): T {
  for (;;) {
    const r = steps.next();
    if (r.done) return r.value;
  }
}
