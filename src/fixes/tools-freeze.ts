// tools-freeze: holds a session's first tools[] byte-stable. Later additions go in as deferred tools and are
// announced with tool_addition (removals with tool_removal) in mid-conversation system messages. Pure.

import { anthropicModelFacts } from '../cache/anthropic-models.js';
import {
  isObj,
  type Json,
  type Message,
  readBody,
  TOOL_CHANGES_BETA,
  toolId,
  withBeta,
  writeBody,
} from './anthropic-messages.js';
import type { DeclaredChange, Fix } from './fix.js';

/** A deferred tool the session carries from its first request, so later deferred additions keep the hash. */
export const PLACEHOLDER_TOOL: Json = {
  name: 'cacheward_deferred_placeholder',
  description: 'Placeholder so tools can be added later without changing the cached prefix. Never call it.',
  input_schema: { type: 'object', properties: {} },
  defer_loading: true,
};

export interface FreezeState {
  /** The tools as first seen (parsed), forwarded in this form on every request. */
  frozen: Json[] | null;
  /** Tools that appeared later, forwarded as deferred, in the order they appeared. */
  added: Json[];
  /** Names announced as removed. */
  removed: string[];
  /** Announcements: before which client message (index in the client's list), and their blocks. */
  announcements: Array<{ at: number; blocks: Json[] }>;
  /** Models already reported as lacking the feature. */
  warned: string[];
}

const nameOf = (t: Json) => String(t.name ?? '');
const fresh = (warned: string[] = []): FreezeState => ({
  frozen: null,
  added: [],
  removed: [],
  announcements: [],
  warned,
});

export const toolsFreeze: Fix<FreezeState> = {
  name: 'tools-freeze',
  description: "hold a session's first tools[] byte-stable; announce later additions and removals instead",
  initialState: () => fresh(),
  apply(req, state, ctx) {
    if (ctx.provider !== 'anthropic') return { state, notes: [] };
    const body = readBody(req.body);
    const model = typeof body.model === 'string' ? body.model : '';
    if (!anthropicModelFacts(model).midConversationSystem) {
      if (state.warned.includes(model)) return { state, notes: [] };
      return {
        state: { ...state, warned: [...state.warned, model] },
        notes: [
          `${model || 'this model'} does not support mid-conversation tool changes: forwarded unchanged`,
        ],
      };
    }
    const clientTools = (Array.isArray(body.tools) ? body.tools : []).filter(isObj) as Json[];
    const messages = (Array.isArray(body.messages) ? body.messages : []).filter(isObj) as Message[];
    const notes: string[] = [];
    let next: FreezeState = {
      ...state,
      added: [...state.added],
      removed: [...state.removed],
      announcements: state.announcements.map((a) => ({ ...a, blocks: [...a.blocks] })),
    };
    const changes: DeclaredChange[] = [];
    if (!next.frozen) {
      next.frozen = clientTools;
      notes.push(
        `froze ${clientTools.length} tools; a deferred placeholder rides along from the first request`,
      );
    } else {
      const frozenByName = new Map(next.frozen.map((t) => [nameOf(t), t]));
      const addedByName = new Map(next.added.map((t) => [nameOf(t), t]));
      const newAnnouncements: Json[] = [];
      for (const tool of clientTools) {
        const name = nameOf(tool);
        const known = frozenByName.get(name) ?? addedByName.get(name);
        if (known) {
          const { defer_loading: _d, ...plainKnown } = known;
          if (toolId(plainKnown) !== toolId(tool) && toolId(known) !== toolId(tool)) {
            // A changed schema cannot be hidden from the model: pass it through and start over.
            return {
              state: fresh(state.warned),
              notes: [
                `the definition of ${name} changed: forwarded as sent; the session's frozen tools reset`,
              ],
            };
          }
          if (next.removed.includes(name)) {
            next.removed = next.removed.filter((n) => n !== name);
            newAnnouncements.push({ type: 'tool_addition', tool: { type: 'tool_reference', name } });
          }
          continue;
        }
        next.added.push(tool);
        newAnnouncements.push({ type: 'tool_addition', tool: { type: 'tool_reference', name } });
        notes.push(`${name} added as a deferred tool and announced`);
      }
      const clientNames = new Set(clientTools.map(nameOf));
      for (const t of [...next.frozen, ...next.added]) {
        const name = nameOf(t);
        if (!clientNames.has(name) && !next.removed.includes(name)) {
          next.removed.push(name);
          newAnnouncements.push({ type: 'tool_removal', tool: { type: 'tool_reference', name } });
          notes.push(`${name} withdrawn with tool_removal (it stays declared)`);
        }
      }
      if (newAnnouncements.length) {
        const last = messages[messages.length - 1];
        if (!last || last.role !== 'user') {
          notes.push(
            'the request does not end on a user turn: the tool change cannot be announced here; forwarded as sent',
          );
          return { state, notes };
        }
        const existing = next.announcements.find((a) => a.at === messages.length);
        if (existing) existing.blocks.push(...newAnnouncements);
        else next.announcements.push({ at: messages.length, blocks: newAnnouncements });
      }
    }
    // The forwarded request: frozen tools, the placeholder, the deferred additions; announcements in place.
    const frozen = next.frozen ?? [];
    const tools = [...frozen, PLACEHOLDER_TOOL, ...next.added.map((t) => ({ ...t, defer_loading: true }))];
    const forwarded: Json[] = [];
    const order = [...next.announcements].sort((a, b) => a.at - b.at);
    let k = 0;
    for (let i = 0; i <= messages.length; i++) {
      while (k < order.length && (order[k] as { at: number }).at === i) {
        changes.push({ kind: 'insert-message', index: forwarded.length });
        forwarded.push({ role: 'system', content: (order[k] as { blocks: Json[] }).blocks });
        k++;
      }
      if (i < messages.length) forwarded.push(messages[i] as unknown as Json);
    }
    // Announcements past the end of this request's history (it was cut short) cannot be placed: start over.
    if (k < order.length) {
      return {
        state: fresh(state.warned),
        notes: ['the history is shorter than the announcements: forwarded as sent, state reset'],
      };
    }
    changes.push(
      { kind: 'tools', detail: 'frozen tools[] with a deferred placeholder' },
      { kind: 'beta', value: TOOL_CHANGES_BETA },
    );
    next = { ...next };
    return {
      body: writeBody({ ...body, tools, messages: forwarded }),
      headers: { 'anthropic-beta': withBeta(req.headers['anthropic-beta'], TOOL_CHANGES_BETA) },
      state: next,
      notes,
      changes,
    };
  },
};
