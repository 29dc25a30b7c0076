// The registry of built-in fixes, by the names `--fix` takes.
// It never holds per-session state: that lives in the session store.

import { FixRegistry } from './fix.js';
import { pinReminders } from './pin-reminders.js';
import { stripBillingHeader } from './strip-billing-header.js';
import { toolsFreeze } from './tools-freeze.js';
import { toolsSort } from './tools-sort.js';
import { ttlFix } from './ttl.js';

/** A registry with every built-in fix. `ttl` is the `ttl` fix's lifetime (`--ttl`, default 1h). */
export function fixRegistry(ttl: '5m' | '1h' = '1h'): FixRegistry {
  return new FixRegistry()
    .register(toolsFreeze)
    .register(toolsSort)
    .register(pinReminders)
    .register(ttlFix(ttl))
    .register(stripBillingHeader);
}
