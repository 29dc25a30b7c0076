// ttl: sets the TTL of the client's cache breakpoints (and the automatic one) to one value, so the
// longer-before-shorter rule always holds. Pure; it never adds or removes a breakpoint, and copies what it changes.

import { bodyOf, isObj, type Json, writeBody } from './anthropic-messages.js';
import type { Fix } from './fix.js';

/** The `ttl` fix for a given lifetime (`--ttl 1h` or `5m`). */
export function ttlFix(ttl: '5m' | '1h'): Fix<null> {
  return {
    name: 'ttl',
    description: `set every cache breakpoint's TTL to ${ttl}`,
    initialState: () => null,
    apply(req, state) {
      const sent = bodyOf(req);
      let changed = 0;
      // The parsed body is shared with the prefix model: every changed holder is a copy.
      const mark = (holder: Json): Json => {
        const cc = holder.cache_control;
        if (!isObj(cc) || (cc.ttl ?? '5m') === ttl) return holder;
        changed++;
        return { ...holder, cache_control: { ...cc, ttl } };
      };
      const visit = (blocks: unknown): unknown =>
        Array.isArray(blocks) ? blocks.map((b) => (isObj(b) ? mark(b) : b)) : blocks;
      const body: Json = mark({ ...sent });
      if (Array.isArray(sent.tools)) body.tools = visit(sent.tools);
      if (Array.isArray(sent.system)) body.system = visit(sent.system);
      if (Array.isArray(sent.messages))
        body.messages = sent.messages.map((m) =>
          isObj(m) && Array.isArray(m.content) ? { ...m, content: visit(m.content) } : m,
        );
      if (!changed) return { state, notes: [] };
      return {
        body: writeBody(body),
        state,
        notes: [`set ${changed} breakpoint${changed === 1 ? '' : 's'} to ttl ${ttl}`],
        changes: [{ kind: 'ttl', ttl }],
      };
    },
  };
}
