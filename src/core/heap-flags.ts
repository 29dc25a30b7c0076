// Applies V8 heap flags to this process, each at most once: the one place the commands tune their heap.
// Never called by library code on its own: a library user's process keeps the flags its owner chose.

import { setFlagsFromString } from 'node:v8';

const applied = new Set<string>();

/** Sets each flag that has not been set yet (V8 reads these at each collection, so late is still in time). */
export function applyHeapFlags(flags: readonly string[]): void {
  for (const flag of flags) {
    if (applied.has(flag)) continue;
    applied.add(flag);
    setFlagsFromString(flag);
  }
}
