// The registry of built-in fixes, by the names `--fix` takes.
// Fixes register here as they land; the registry never holds per-session state.

import { FixRegistry } from './fix.js';

/** A registry with every built-in fix. */
export function fixRegistry(): FixRegistry {
  return new FixRegistry();
}
