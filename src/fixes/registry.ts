// The registry of built-in fixes, by the names `--fix` takes.
// It never holds per-conversation state: that lives in the state stores (state/).

import { FixRegistry } from './fix.js';
import { pinReminders } from './pin-reminders.js';
import { stripBillingHeader } from './strip-billing-header.js';
import { toolsFreeze } from './tools-freeze.js';
import { toolsSort } from './tools-sort.js';
import { ttlFix } from './ttl.js';

/**
 * The order the built-in fixes run in, whatever order `--fix` names them: the billing line and the tool
 * order first, then the history's shape (pin-reminders), then tool announcements placed in that history
 * (tools-freeze), and the TTL of the breakpoints last.
 */
export const FIX_ORDER = ['strip-billing-header', 'tools-sort', 'pin-reminders', 'tools-freeze', 'ttl'];

/** A registry with every built-in fix. `ttl` is the `ttl` fix's lifetime (`--ttl`, default 1h). */
export function fixRegistry(ttl: '5m' | '1h' = '1h'): FixRegistry {
  return new FixRegistry(FIX_ORDER)
    .register(toolsFreeze)
    .register(toolsSort)
    .register(pinReminders)
    .register(ttlFix(ttl))
    .register(stripBillingHeader);
}
