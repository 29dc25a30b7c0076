// strip-billing-header: removes Claude Code's billing line (its first system block,
// `x-anthropic-billing-header: …; cch=…;`, new on every request) for upstreams that cache by raw prefix.
// Pure. Never for api.anthropic.com: there the line is outside the cache key and carries billing attribution.

import type { Fix } from './fix.js';

/**
 * The line is found by the prefix model (`Prefix.billingHeader`, src/prefix/billing-header.ts), and cut out
 * of the bytes with the comma that joins it to the next block: everything else is forwarded byte for byte.
 * Meant for gateways and proxies speaking the Messages format in front of other caches (their key is the
 * raw prompt, so a line that changes every request busts everything after it).
 */
export const stripBillingHeader: Fix<null> = {
  name: 'strip-billing-header',
  description:
    "remove Claude Code's per-request billing line from system[0], for gateways that cache by raw prefix (not for api.anthropic.com)",
  initialState: () => null,
  apply(req, state) {
    const span = req.prefix.billingHeader;
    if (req.prefix.format !== 'anthropic-messages' || !span) return { state, notes: [] };
    const bytes = req.body;
    let end = span.end;
    while (end < bytes.length && isSpace(bytes[end] as number)) end++;
    let start = span.start;
    if (bytes[end] === 0x2c) {
      // `[line, next…]`: drop the line, the comma and the space after it.
      end++;
      while (end < bytes.length && isSpace(bytes[end] as number)) end++;
    } else {
      // `[…, line]` cannot happen (it is the first block); `[line]`: leave `[]`.
      while (start > 0 && isSpace(bytes[start - 1] as number)) start--;
    }
    return {
      patches: [{ start, end, text: '' }],
      state,
      notes: ["removed Claude Code's billing line from system[0]"],
      changes: [
        { kind: 'system', detail: 'billing line (x-anthropic-billing-header) removed from system[0]' },
      ],
    };
  },
};

function isSpace(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}
