// ttl: sets the TTL of the client's cache breakpoints (and the automatic one) to one value, so the
// longer-before-shorter rule always holds. Pure; it never adds or removes a breakpoint.

import { isObj, type Json, readBody, writeBody } from './anthropic-messages.js';
import type { Fix } from './fix.js';

/** The `ttl` fix for a given lifetime (`--ttl 1h` or `5m`). */
export function ttlFix(ttl: '5m' | '1h'): Fix<null> {
  return {
    name: 'ttl',
    description: `set every cache breakpoint's TTL to ${ttl}`,
    initialState: () => null,
    apply(req, state) {
      const body = readBody(req.body);
      let changed = 0;
      const mark = (holder: Json) => {
        const cc = holder.cache_control;
        if (!isObj(cc)) return;
        const current = cc.ttl ?? '5m';
        if (current === ttl) return;
        holder.cache_control = { ...cc, ttl };
        changed++;
      };
      const visit = (blocks: unknown) => {
        if (Array.isArray(blocks)) for (const b of blocks) if (isObj(b)) mark(b);
      };
      visit(body.tools);
      visit(body.system);
      if (Array.isArray(body.messages)) for (const m of body.messages) if (isObj(m)) visit(m.content);
      mark(body);
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
