// Claude Code's billing line: the first system text block `x-anthropic-billing-header: cc_version=…;
// cc_entrypoint=…; cch=…;`. Finds it in a parsed body; never edits a body and never decides on its own.
//
// Observed behaviour (docs/SPEC-caching.md, "Claude Code's billing line"): Claude Code changes this block on
// every request yet reaches high cache hit rates on the first-party Anthropic API, so that API keeps it out
// of the cached prefix. The prefix model therefore leaves it out of the blocks, keys and token counts of an
// Anthropic Messages body (model choice: not counted as input either) and records its span as
// `Prefix.billingHeader`, so the analyzer, diffs and the simulator agree that changing it changes nothing.
// Gateways that cache by raw prefix do see it: the `strip-billing-header` fix removes it for them.

import { parseSpan } from '../wire/json-scan.js';
import type { RawUnit, RequestBody } from '../wire/request-body.js';

/** How the block's text starts. */
export const BILLING_HEADER_PREFIX = 'x-anthropic-billing-header:';

const NEEDLE = Buffer.from(BILLING_HEADER_PREFIX);
/** Where the needle must appear in a block's bytes: `{"type":"text","text":"` plus room for whitespace. */
const WINDOW = 96;

/**
 * The index in `body.units` of the billing line, or -1: an Anthropic Messages body whose `system` is an
 * array and whose first block is `{"type":"text","text":"x-anthropic-billing-header:…"}`. A string
 * `system` is the whole system prompt and is never taken for it.
 */
export function billingHeaderUnit(body: RequestBody): number {
  if (body.format !== 'anthropic-messages') return -1;
  const i = body.units.findIndex((u) => u.level === 'system');
  const unit = body.units[i] as RawUnit | undefined;
  if (unit?.partIndex !== 0 || unit.node.type !== 'object') return -1;
  const head = body.bytes.subarray(unit.span.start, Math.min(unit.span.end, unit.span.start + WINDOW));
  if (head.indexOf(NEEDLE) < 0) return -1;
  const block = parseSpan(body.bytes, unit.span.start, unit.span.end) as Record<string, unknown>;
  return block.type === 'text' &&
    typeof block.text === 'string' &&
    block.text.startsWith(BILLING_HEADER_PREFIX)
    ? i
    : -1;
}
