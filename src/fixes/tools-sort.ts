// tools-sort: tools[] in a stable order (by name), for clients that shuffle their tools between turns.
// Pure; it never adds, drops or edits a tool: each place in tools[] gets another of the client's own tools' bytes.

import { decodeStringAt, parseSpan, type ScanNode } from '../wire/json-scan.js';
import type { BytePatch } from './byte-patch.js';
import type { Fix } from './fix.js';
import { membersAt } from './json-members.js';

/** A tool's name as the sort reads it: `name`, or `function.name` (OpenAI Chat); '' when it has none. */
function nameOf(bytes: Buffer, tool: ScanNode): string {
  if (tool.type !== 'object') return '';
  const name = tool.members.get('name');
  if (name) return textOf(bytes, name);
  const fn = tool.members.get('function');
  if (fn?.type !== 'leaf' || fn.first !== 0x7b) return '';
  const inner = membersAt(bytes, fn.start, fn.end, ['name'])?.get('name');
  return inner ? textOf(bytes, inner) : '';
}

function textOf(bytes: Buffer, v: { start: number; end: number }): string {
  if (bytes[v.start] === 0x22) return decodeStringAt(bytes, v.start, v.end);
  const value = parseSpan(bytes, v.start, v.end);
  return value === null ? '' : String(value);
}

/** The TTL a tool's marker asks for ('5m' when it names none), or undefined when it has no marker. */
function markerTtl(bytes: Buffer, tool: ScanNode): unknown {
  const cc = tool.type === 'object' ? tool.members.get('cache_control') : undefined;
  if (cc?.type !== 'leaf' || cc.first !== 0x7b) return undefined;
  const ttl = membersAt(bytes, cc.start, cc.end, ['ttl'])?.get('ttl');
  return ttl ? parseSpan(bytes, ttl.start, ttl.end) : '5m';
}

export const toolsSort: Fix<null> = {
  name: 'tools-sort',
  description: 'sort tools[] by name so a shuffled tool list keeps one byte order',
  initialState: () => null,
  apply(req, state) {
    const { root, bytes } = req.prefix.body;
    const tools = root.members.get('tools');
    if (tools?.type !== 'array' || tools.items.length < 2) return { state, notes: [] };
    const items = tools.items;
    const names = items.map((t) => nameOf(bytes, t));
    const order = items.map((_, i) => i);
    order.sort((a, b) => {
      const x = names[a] as string;
      const y = names[b] as string;
      return x < y ? -1 : x > y ? 1 : 0;
    });
    if (order.every((k, i) => k === i)) return { state, notes: [] };
    // Markers of different lifetimes must keep their order (a 1h after a 5m is refused): left as sent.
    const ttls = new Set(items.map((t) => markerTtl(bytes, t)).filter((t) => t !== undefined));
    if (ttls.size > 1)
      return {
        state,
        notes: ['tools carry cache markers of different TTLs: left in the order sent'],
      };
    const patches: BytePatch[] = [];
    order.forEach((k, i) => {
      if (k === i) return;
      const at = items[i] as ScanNode;
      const from = items[k] as ScanNode;
      patches.push({ start: at.start, end: at.end, text: bytes.subarray(from.start, from.end) });
    });
    return {
      patches,
      state,
      notes: ['sorted tools[] by name'],
      changes: [{ kind: 'tools', detail: 'sorted by name' }],
    };
  },
};
