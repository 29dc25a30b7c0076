// tools-sort: tools[] in a stable order (by name), for clients that shuffle their tools between turns.
// Pure; it never adds, drops or edits a tool.

import { bodyOf, isObj, type Json, writeBody } from './anthropic-messages.js';
import type { Fix } from './fix.js';

const nameOf = (t: unknown) =>
  isObj(t) ? String(t.name ?? (isObj(t.function) ? t.function.name : '') ?? '') : '';

export const toolsSort: Fix<null> = {
  name: 'tools-sort',
  description: 'sort tools[] by name so a shuffled tool list keeps one byte order',
  initialState: () => null,
  apply(req, state) {
    const body = bodyOf(req);
    const tools = body.tools;
    if (!Array.isArray(tools) || tools.length < 2) return { state, notes: [] };
    const sorted = [...tools].sort((a, b) => (nameOf(a) < nameOf(b) ? -1 : nameOf(a) > nameOf(b) ? 1 : 0));
    if (sorted.every((t, i) => t === tools[i])) return { state, notes: [] };
    return {
      body: writeBody({ ...body, tools: sorted as Json[] }),
      state,
      notes: ['sorted tools[] by name'],
      changes: [{ kind: 'tools', detail: 'sorted by name' }],
    };
  },
};
