// ttl: sets the TTL of the client's cache breakpoints (and the automatic one) to one value, so the
// longer-before-shorter rule always holds. Pure; it never adds or removes a breakpoint, and patches only the
// `ttl` of each `cache_control` it changes (Anthropic Messages; other formats have no such breakpoints).

import { parseSpan, type ScanNode } from '../wire/json-scan.js';
import type { BytePatch } from './byte-patch.js';
import type { Fix } from './fix.js';
import { membersAt, setMember } from './json-members.js';

/** The `ttl` fix for a given lifetime (`--ttl 1h` or `5m`). */
export function ttlFix(ttl: '5m' | '1h'): Fix<null> {
  const value = JSON.stringify(ttl);
  return {
    name: 'ttl',
    description: `set every cache breakpoint's TTL to ${ttl}`,
    initialState: () => null,
    apply(req, state) {
      if (req.prefix.format !== 'anthropic-messages') return { state, notes: [] };
      const { root, bytes } = req.prefix.body;
      const patches: BytePatch[] = [];
      // A holder's `cache_control` object: its `ttl` value replaced, or one added after its last member.
      const mark = (holder: ScanNode | undefined) => {
        if (holder?.type !== 'object') return;
        const cc = holder.members.get('cache_control');
        if (cc?.type !== 'leaf' || cc.first !== 0x7b) return;
        const members = membersAt(bytes, cc.start, cc.end);
        if (!members) return;
        const sent = members.get('ttl');
        if ((sent ? parseSpan(bytes, sent.start, sent.end) : '5m') === ttl) return;
        patches.push(setMember(cc, members, 'ttl', value));
      };
      const each = (node: ScanNode | undefined, visit: (n: ScanNode) => void) => {
        if (node?.type === 'array') for (const item of node.items) visit(item);
      };
      mark(root);
      each(root.members.get('tools'), mark);
      each(root.members.get('system'), mark);
      each(root.members.get('messages'), (m) => {
        if (m.type === 'object') each(m.members.get('content'), mark);
      });
      if (!patches.length) return { state, notes: [] };
      patches.sort((a, b) => a.start - b.start);
      const n = patches.length;
      return {
        patches,
        state,
        notes: [`set ${n} breakpoint${n === 1 ? '' : 's'} to ttl ${ttl}`],
        changes: [{ kind: 'ttl', ttl }],
      };
    },
  };
}
