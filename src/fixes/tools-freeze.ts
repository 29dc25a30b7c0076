// tools-freeze: holds a conversation's first tools[] byte-stable. Later additions go in as deferred tools and
// are announced with tool_addition (removals with tool_removal) in mid-conversation system messages. Pure.
// The frozen definitions are kept in state because they must be re-sent (also under --capture hashes).

import { anthropicModelFacts } from '../cache/anthropic-models.js';
import {
  bodyOf,
  type Json,
  messageShape,
  messagesOf,
  sameDefinition,
  TOOL_CHANGES_BETA,
  toolsOf,
  withBeta,
  writeBody,
} from './anthropic-messages.js';
import type { DeclaredChange, Fix } from './fix.js';
import { spliceBody } from './splice-body.js';

/** A deferred tool the conversation carries from its first request, so later deferred additions keep the hash. */
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
  description:
    "hold a conversation's first tools[] byte-stable; announce later additions and removals instead",
  initialState: () => fresh(),
  apply(req, state, ctx) {
    if (ctx.provider !== 'anthropic') return { state, notes: [] };
    // Read from the prefix model's scan: the tools parsed alone, the messages only counted.
    const fields = req.prefix.body.fields;
    const model = typeof fields.model === 'string' ? fields.model : '';
    if (!anthropicModelFacts(model).midConversationSystem) {
      if (state.warned.includes(model)) return { state, notes: [] };
      return {
        state: { ...state, warned: [...state.warned, model] },
        notes: [
          `${model || 'this model'} does not support mid-conversation tool changes: forwarded unchanged`,
        ],
      };
    }
    const clientTools = toolsOf(req);
    const messages = messageShape(req);
    const notes: string[] = [];
    let next: FreezeState = {
      ...state,
      added: [...state.added],
      removed: [...state.removed],
      announcements: state.announcements.map((a) => ({ ...a, blocks: [...a.blocks] })),
    };
    const changes: DeclaredChange[] = [];
    const freeze = (why: string) => {
      next = { ...fresh(state.warned), frozen: clientTools };
      notes.push(why);
    };
    if (!next.frozen) {
      freeze(`froze ${clientTools.length} tools; a deferred placeholder rides along from the first request`);
    } else {
      let changedDefinition: string | undefined;
      const frozenByName = new Map(next.frozen.map((t) => [nameOf(t), t]));
      const addedByName = new Map(next.added.map((t) => [nameOf(t), t]));
      const newAnnouncements: Json[] = [];
      for (const tool of clientTools) {
        const name = nameOf(tool);
        const known = frozenByName.get(name) ?? addedByName.get(name);
        if (known) {
          if (!sameDefinition(known, tool)) {
            // A changed definition cannot be hidden from the model: the prefix breaks here anyway, so
            // re-freeze on this very request (one miss, as without the fix; never a second one next turn).
            changedDefinition = name;
            break;
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
      if (changedDefinition !== undefined) {
        freeze(
          `the definition of ${changedDefinition} changed: re-froze the ${clientTools.length} tools sent`,
        );
        newAnnouncements.length = 0;
      }
      for (const t of changedDefinition !== undefined ? [] : [...(next.frozen ?? []), ...next.added]) {
        const name = nameOf(t);
        if (!clientNames.has(name) && !next.removed.includes(name)) {
          next.removed.push(name);
          newAnnouncements.push({ type: 'tool_removal', tool: { type: 'tool_reference', name } });
          notes.push(`${name} withdrawn with tool_removal (it stays declared)`);
        }
      }
      if (newAnnouncements.length) {
        if (messages.lastRole !== 'user') {
          notes.push(
            'the request does not end on a user turn: the tool change cannot be announced here; forwarded as sent',
          );
          return { state, notes };
        }
        const existing = next.announcements.find((a) => a.at === messages.count);
        if (existing) existing.blocks.push(...newAnnouncements);
        else next.announcements.push({ at: messages.count, blocks: newAnnouncements });
      }
    }
    // The forwarded request: frozen tools, the placeholder, the deferred additions; announcements in place.
    let rendered = render(next, messages.count);
    if (!rendered) {
      // Announcements past the end of this request's history (it was cut short: a compaction, a fork
      // from an earlier turn) cannot be placed: re-freeze what this request sends.
      freeze('the history is shorter than the announcements: re-froze the tools sent');
      rendered = render(next, messages.count) as Rendered;
    }
    const { tools, insert } = rendered;
    changes.push(...rendered.changes);
    changes.push(
      { kind: 'tools', detail: 'frozen tools[] with a deferred placeholder' },
      { kind: 'beta', value: TOOL_CHANGES_BETA },
    );
    // Spliced into the client's bytes (the same bytes a whole re-serialization writes, at the cost of
    // what changed); a body that is not compact JSON is parsed and written whole.
    const body =
      spliceBody(req.prefix.body, { setText: { tools: toolsJson(next, tools) }, insert }) ??
      writeBody(forwardedValue(req, tools, insert));
    return {
      body,
      headers: { 'anthropic-beta': withBeta(req.headers['anthropic-beta'], TOOL_CHANGES_BETA) },
      state: next,
      notes,
      changes,
    };
  },
};

/**
 * `JSON.stringify(tools)` for the tools a state renders, remembered by the state's frozen list and its added
 * tools (values are never mutated): the same tools go out on every request of a conversation.
 */
function toolsJson(state: FreezeState, tools: readonly Json[]): string {
  const frozen = state.frozen;
  if (!frozen) return JSON.stringify(tools);
  const known = renderedTools.get(frozen);
  if (known && known.added.length === state.added.length && known.added.every((t, i) => t === state.added[i]))
    return known.text;
  const text = JSON.stringify(tools);
  renderedTools.set(frozen, { added: [...state.added], text });
  return text;
}

const renderedTools = new WeakMap<readonly Json[], { added: readonly Json[]; text: string }>();

interface Rendered {
  tools: Json[];
  /** The announcement messages, before which of the client's messages. */
  insert: Array<{ before: number; message: Json }>;
  changes: DeclaredChange[];
}

/** The tools and insertions to forward for a state; undefined when an announcement falls past the history. */
function render(state: FreezeState, messageCount: number): Rendered | undefined {
  const tools = [
    ...(state.frozen ?? []),
    PLACEHOLDER_TOOL,
    ...state.added.map((t) => ({ ...t, defer_loading: true })),
  ];
  const insert: Rendered['insert'] = [];
  const changes: DeclaredChange[] = [];
  const order = [...state.announcements].sort((a, b) => a.at - b.at);
  for (const a of order) {
    if (a.at > messageCount) return undefined;
    changes.push({ kind: 'insert-message', index: a.at + insert.length });
    insert.push({ before: a.at, message: { role: 'system', content: a.blocks } });
  }
  return { tools, insert, changes };
}

/** The forwarded request as a value, for a body that cannot be spliced. */
function forwardedValue(req: Parameters<typeof bodyOf>[0], tools: Json[], insert: Rendered['insert']): Json {
  const body = bodyOf(req);
  const messages = messagesOf(body);
  const forwarded: Json[] = [];
  let k = 0;
  for (let i = 0; i <= messages.length; i++) {
    while (k < insert.length && (insert[k] as { before: number }).before === i)
      forwarded.push((insert[k++] as { message: Json }).message);
    if (i < messages.length) forwarded.push(messages[i] as Json);
  }
  return { ...body, tools, messages: forwarded };
}
