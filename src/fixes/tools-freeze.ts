// tools-freeze: holds a conversation's first tools[] byte-stable. Later additions go in as deferred tools and
// are announced with tool_addition (removals with tool_removal) in mid-conversation system messages. Pure.
// The frozen tools are the client's bytes as first seen, kept in state (they must be re-sent, also under
// --capture hashes); a tool-less request, and a client that defers its own tools under the beta, go as sent.

import { anthropicModelFacts } from '../cache/anthropic-models.js';
import { CachewardError } from '../core/errors.js';
import { decodeStringAt, parseSpan, type ScanNode, scanJson } from '../wire/json-scan.js';
import {
  type Json,
  messageShape,
  roleAt,
  sameDefinition,
  TOOL_CHANGES_BETA,
  withBeta,
} from './anthropic-messages.js';
import { applyPatches, type BytePatch } from './byte-patch.js';
import type { DeclaredChange, Fix } from './fix.js';
import { keyStartOf, membersAt, removeMember, setMember } from './json-members.js';

/** A deferred tool the conversation carries from its first request, so later deferred additions keep the hash. */
export const PLACEHOLDER_TOOL: Json = {
  name: 'cacheward_deferred_placeholder',
  description: 'Placeholder so tools can be added later without changing the cached prefix. Never call it.',
  input_schema: { type: 'object', properties: {} },
  defer_loading: true,
};
const PLACEHOLDER = `,${JSON.stringify(PLACEHOLDER_TOOL)}`;

export interface FreezeState {
  /** The client's `tools` value as first seen, byte for byte (as text); forwarded so on every request. */
  frozen: string | null;
  /** Tools that appeared later, each the client's bytes of it as first seen, forwarded as deferred. */
  added: string[];
  /** Names announced as removed. */
  removed: string[];
  /** Announcements: before which client message (index in the client's list), and their blocks. */
  announcements: Array<{ at: number; blocks: Json[] }>;
  /** Models already reported as lacking the feature. */
  warned: string[];
}

const fresh = (warned: string[] = []): FreezeState => ({
  frozen: null,
  added: [],
  removed: [],
  announcements: [],
  warned,
});

/** A tool's bytes, its name, and its parse once something needed it. */
interface ToolBytes {
  name: string;
  bytes: Buffer;
  parsed?: Json;
}

export const toolsFreeze: Fix<FreezeState> = {
  name: 'tools-freeze',
  description:
    "hold a conversation's first tools[] byte-stable; announce later additions and removals instead",
  initialState: () => fresh(),
  apply(req, given, ctx) {
    if (ctx.provider !== 'anthropic') return { state: given, notes: [] };
    const state = current(given);
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
    // A client that defers tools itself under the beta keeps its tools[] stable on its own (the newest Claude
    // Code): a second placeholder would only change what it keeps stable.
    if (req.prefix.deferredTools.length && sentBeta(req.headers['anthropic-beta']))
      return {
        state,
        notes: [
          'the client declares its own deferred tools and the mid-conversation-tool-changes beta: forwarded unchanged',
        ],
      };
    const { root, bytes } = req.prefix.body;
    const node = root.members.get('tools');
    const items = node?.type === 'array' ? node.items : [];
    // A tool-less conversation has nothing to freeze: the provider refuses a tools[] of deferred tools only.
    if (!state.frozen && !items.length) return { state, notes: [] };
    const clientTools = items.map((item) => ({ name: nameAt(bytes, item), item }));
    const clientText = () =>
      node && items.length ? intern(bytes.toString('utf8', node.start, node.end)) : null;
    const messages = messageShape(req);
    const notes: string[] = [];
    let next: FreezeState = {
      ...state,
      added: [...state.added],
      removed: [...state.removed],
      announcements: state.announcements.map((a) => ({ ...a, blocks: [...a.blocks] })),
    };
    const freeze = (why: string) => {
      next = { ...fresh(state.warned), frozen: clientText() };
      notes.push(why);
    };
    if (!next.frozen) {
      freeze(`froze ${items.length} tools; a deferred placeholder rides along from the first request`);
    } else {
      const frozen = frozenTools(next.frozen);
      // The tools sent as first seen, byte for byte (the common case): none added, none changed.
      const asFrozen = !!node && sameBytes(frozen.bytes, bytes, node.start, node.end);
      let changedDefinition: string | undefined;
      const frozenByName = new Map(frozen.tools.map((t) => [t.name, t]));
      const addedByName = new Map(next.added.map((a) => addedTool(a)).map((t) => [t.name, t]));
      const newAnnouncements: Json[] = [];
      const readd = (name: string) => {
        if (!next.removed.includes(name)) return;
        next.removed = next.removed.filter((n) => n !== name);
        newAnnouncements.push({ type: 'tool_addition', tool: { type: 'tool_reference', name } });
      };
      if (asFrozen) for (const t of frozen.tools) readd(t.name);
      for (const tool of asFrozen ? [] : clientTools) {
        const name = tool.name;
        const known = frozenByName.get(name) ?? addedByName.get(name);
        if (known) {
          if (!sameTool(known, bytes, tool.item)) {
            // A changed definition cannot be hidden from the model: the prefix breaks here anyway, so
            // re-freeze on this very request (one miss, as without the fix; never a second one next turn).
            changedDefinition = name;
            break;
          }
          readd(name);
          continue;
        }
        const text = intern(bytes.toString('utf8', tool.item.start, tool.item.end));
        next.added.push(text);
        addedByName.set(name, addedTool(text));
        newAnnouncements.push({ type: 'tool_addition', tool: { type: 'tool_reference', name } });
        notes.push(`${name} added as a deferred tool and announced`);
      }
      const clientNames = new Set(
        asFrozen ? frozen.tools.map((t) => t.name) : clientTools.map((t) => t.name),
      );
      if (changedDefinition !== undefined) {
        freeze(`the definition of ${changedDefinition} changed: re-froze the ${items.length} tools sent`);
        newAnnouncements.length = 0;
      } else {
        const declared = [...frozen.tools.map((t) => t.name), ...next.added.map((a) => addedTool(a).name)];
        for (const name of declared) {
          if (!clientNames.has(name) && !next.removed.includes(name)) {
            next.removed.push(name);
            newAnnouncements.push({ type: 'tool_removal', tool: { type: 'tool_reference', name } });
            notes.push(`${name} withdrawn with tool_removal (it stays declared)`);
          }
        }
      }
      if (newAnnouncements.length) {
        // A system message follows a user turn, or extends a system section the client ended on.
        if (messages.lastRole !== 'user' && messages.lastRole !== 'system') {
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
    const role = (k: number) => roleAt(req, k);
    let rendered = render(next, messages.count, role);
    if (!rendered) {
      // An announcement with no place in this request's history (it was cut short: a compaction, a fork
      // from an earlier turn; or reshaped, so the message before it is no longer a user turn) would make the
      // request invalid: re-freeze what this request sends (the miss it has without the fix, no more).
      freeze('an announcement has no valid place in this history any more: re-froze the tools sent');
      rendered = render(next, messages.count, role) as Rendered;
    }
    // Re-frozen on a request without tools: nothing to forward but the client's bytes.
    if (!next.frozen) return { state: next, notes };
    const patches: BytePatch[] = [toolsPatch(req.prefix.body.root, bytes, next)];
    const list = root.members.get('messages');
    for (const { before, message } of rendered.insert) {
      const text = JSON.stringify(message);
      if (list?.type !== 'array') throw new CachewardError('CW_FIX_INPUT', 'no messages to announce in');
      const at = list.items[before];
      const last = list.items[list.items.length - 1];
      if (at) patches.push({ start: at.start, end: at.start, text: `${text},` });
      else if (last) patches.push({ start: last.end, end: last.end, text: `,${text}` });
      else patches.push({ start: list.start + 1, end: list.start + 1, text });
    }
    patches.sort((a, b) => a.start - b.start);
    const changes: DeclaredChange[] = [
      ...rendered.changes,
      { kind: 'tools', detail: 'frozen tools[] with a deferred placeholder' },
      { kind: 'beta', value: TOOL_CHANGES_BETA },
    ];
    return {
      patches,
      headers: { 'anthropic-beta': withBeta(req.headers['anthropic-beta'], TOOL_CHANGES_BETA) },
      state: next,
      notes,
      changes,
    };
  },
};

/** Whether the client itself sent the mid-conversation tool changes beta. */
function sentBeta(header: string | undefined): boolean {
  return (header ?? '').split(',').some((v) => v.trim() === TOOL_CHANGES_BETA);
}

/**
 * The state as this version keeps it: a state written by an earlier one (parsed tools) is read as the bytes
 * it forwarded (`JSON.stringify` of them), so a conversation frozen before an upgrade keeps its prefix.
 */
function current(state: FreezeState): FreezeState {
  const s = state as unknown as { frozen: unknown; added: unknown[] };
  if ((s.frozen === null || typeof s.frozen === 'string') && s.added.every((a) => typeof a === 'string'))
    return state;
  const frozen = Array.isArray(s.frozen) && s.frozen.length ? JSON.stringify(s.frozen) : null;
  return {
    ...state,
    frozen,
    added: frozen ? s.added.map((a) => (typeof a === 'string' ? a : JSON.stringify(a))) : [],
  };
}

/** The patch that puts the forwarded tools in place: the placeholder and additions after the frozen ones. */
function toolsPatch(root: ScanNode, bytes: Buffer, state: FreezeState): BytePatch {
  const frozen = frozenTools(state.frozen as string);
  const after = Buffer.from(PLACEHOLDER + state.added.map((a) => `,${deferred(a)}`).join(''));
  const node = root.type === 'object' ? root.members.get('tools') : undefined;
  const last = node?.type === 'array' ? node.items[node.items.length - 1] : undefined;
  // The client sent the frozen bytes: only the insertion after its last tool.
  if (node && last && sameBytes(frozen.bytes, bytes, node.start, node.end))
    return { start: last.end, end: last.end, text: after };
  const text = Buffer.concat([
    frozen.bytes.subarray(0, frozen.lastEnd),
    after,
    frozen.bytes.subarray(frozen.lastEnd),
  ]);
  if (node) return { start: node.start, end: node.end, text };
  if (root.type !== 'object') throw new CachewardError('CW_FIX_INPUT', 'the body is not an object');
  return setMember(root, root.members, 'tools', text.toString('utf8'));
}

interface Rendered {
  /** The announcement messages, before which of the client's messages. */
  insert: Array<{ before: number; message: Json }>;
  changes: DeclaredChange[];
}

/** The insertions to forward for a state; undefined when an announcement falls past the history. */
function render(
  state: FreezeState,
  messageCount: number,
  roleOf: (k: number) => string | undefined,
): Rendered | undefined {
  const insert: Rendered['insert'] = [];
  const changes: DeclaredChange[] = [];
  const order = [...state.announcements].sort((a, b) => a.at - b.at);
  for (const a of order) {
    if (a.at > messageCount || !placeable(a.at, messageCount, roleOf)) return undefined;
    changes.push({ kind: 'insert-message', index: a.at + insert.length });
    insert.push({ before: a.at, message: { role: 'system', content: a.blocks } });
  }
  return { insert, changes };
}

/**
 * Whether a system message fits before client message `at` (the API's placement rule for mid-conversation
 * system messages): after a user turn or a system section the client sent, and before an assistant turn, a
 * system message, or the end.
 */
function placeable(at: number, messageCount: number, roleOf: (k: number) => string | undefined): boolean {
  const before = at > 0 ? roleOf(at - 1) : undefined;
  if (before !== 'user' && before !== 'system') return false;
  if (at === messageCount) return true;
  const after = roleOf(at);
  return after === 'assistant' || after === 'system';
}

/** A tool's name as the fix compares it (`String(name)`; '' when it has none). */
function nameAt(bytes: Buffer, tool: ScanNode): string {
  const name = tool.type === 'object' ? tool.members.get('name') : undefined;
  if (!name) return '';
  if (bytes[name.start] === 0x22) return decodeStringAt(bytes, name.start, name.end);
  const value = parseSpan(bytes, name.start, name.end);
  return value === null ? '' : String(value);
}

function sameBytes(a: Buffer, b: Buffer, start: number, end: number): boolean {
  return a.length === end - start && a.compare(b, start, end) === 0;
}

/** Whether the client's tool says what a known one says: the same bytes, or the same definition. */
function sameTool(known: ToolBytes, bytes: Buffer, item: ScanNode): boolean {
  if (sameBytes(known.bytes, bytes, item.start, item.end)) return true;
  known.parsed ??= JSON.parse(known.bytes.toString('utf8')) as Json;
  return sameDefinition(known.parsed, parseSpan(bytes, item.start, item.end) as Json);
}

/** A frozen tools[]: its bytes, each tool's bytes and name, and where additions go (after its last tool). */
interface FrozenTools {
  bytes: Buffer;
  tools: ToolBytes[];
  lastEnd: number;
}

const TOOL_SHAPE = { items: { members: {}, only: ['name'] } };

/**
 * Bounded memos by text: the frozen tools of the conversations seen lately (their scan, made once), the
 * added tools' deferred forms, and one copy of each frozen or added text (so conversations that froze the
 * same tools hold one string).
 */
const frozenMemo = new Map<string, FrozenTools>();
const addedMemo = new Map<string, ToolBytes>();
const deferredMemo = new Map<string, string>();
const interned = new Map<string, string>();
const MEMO = 64;

function remember<V>(memo: Map<string, V>, key: string, value: V): V {
  if (memo.size >= MEMO) memo.delete(memo.keys().next().value as string);
  memo.set(key, value);
  return value;
}

function intern(text: string): string {
  return interned.get(text) ?? remember(interned, text, text);
}

function frozenTools(text: string): FrozenTools {
  const known = frozenMemo.get(text);
  if (known) return known;
  const bytes = Buffer.from(text);
  const node = scanJson(bytes, TOOL_SHAPE);
  if (node.type !== 'array' || !node.items.length)
    throw new CachewardError('CW_FIX_INPUT', 'the frozen tools are not a non-empty array');
  const tools = node.items.map((item) => ({
    name: nameAt(bytes, item),
    bytes: bytes.subarray(item.start, item.end),
  }));
  return remember(frozenMemo, text, {
    bytes,
    tools,
    lastEnd: (node.items[node.items.length - 1] as ScanNode).end,
  });
}

function addedTool(text: string): ToolBytes {
  const known = addedMemo.get(text);
  if (known) return known;
  const bytes = Buffer.from(text);
  const node = scanJson(bytes, TOOL_SHAPE.items);
  return remember(addedMemo, text, { name: nameAt(bytes, node), bytes });
}

/**
 * An added tool as forwarded: the client's bytes with `"defer_loading":true` (its own `defer_loading` set to
 * true, or the member added), and its `cache_control` taken out (a deferred tool may not carry one).
 */
function deferred(text: string): string {
  const known = deferredMemo.get(text);
  if (known !== undefined) return known;
  const bytes = Buffer.from(text);
  const members = membersAt(bytes, 0, bytes.length);
  if (!members) throw new CachewardError('CW_FIX_INPUT', 'an added tool is not an object');
  const patches: BytePatch[] = [];
  const flag = members.get('defer_loading');
  const marker = members.get('cache_control');
  const unplaced = () => new CachewardError('CW_FIX_INPUT', "an added tool's cache_control cannot be placed");
  if (flag) {
    if (bytes.toString('latin1', flag.start, flag.end) !== 'true')
      patches.push({ start: flag.start, end: flag.end, text: 'true' });
    if (marker) patches.push(removeMember(bytes, members, 'cache_control') ?? throwIt(unplaced()));
  } else if (marker) {
    // The marker's place takes the flag: `"cache_control":{…}` becomes `"defer_loading":true`.
    const key = keyStartOf(bytes, marker.start, 'cache_control') ?? throwIt(unplaced());
    patches.push({ start: key, end: marker.end, text: '"defer_loading":true' });
  } else patches.push(setMember({ start: 0, end: bytes.length }, members, 'defer_loading', 'true'));
  patches.sort((a, b) => a.start - b.start);
  return remember(deferredMemo, text, applyPatches(bytes, patches).toString('utf8'));
}

function throwIt(err: Error): never {
  throw err;
}
