// What the fixes and the replay gate share for Anthropic Messages bodies: the history's shapes and content
// units with the prefix model's identities, tool definitions compared, the tool changes beta. Pure.
// It never parses bytes itself and never defines an identity: those come from prefix/.

import { CachewardError } from '../core/errors.js';
import { isObj, type Json } from '../core/json.js';

export { isObj, type Json } from '../core/json.js';

import { drainSteps, STEP_ITEMS } from '../core/steps.js';
import type { Prefix, PrefixBlock } from '../prefix/build-prefix.js';
import { stableJson } from '../prefix/stable-json.js';
import { decodeKey, itemsTakenOver, type ScanNode } from '../wire/json-scan.js';
import type { FixRequest } from './fix.js';

export type Message = { role: string; content: string | Json[]; [k: string]: unknown };

/** How many messages the body has, and the role of its last one, from the scan (no parse). */
export function messageShape(req: Pick<FixRequest, 'prefix'>): {
  count: number;
  lastRole: string | undefined;
} {
  const { root, bytes } = req.prefix.body;
  const node = root.members.get('messages');
  if (node?.type !== 'array') return { count: 0, lastRole: undefined };
  const last = node.items[node.items.length - 1];
  const role = last?.type === 'object' ? last.members.get('role') : undefined;
  return {
    count: node.items.length,
    lastRole:
      role?.type === 'leaf' && role.first === 0x22 ? decodeKey(bytes, role.start, role.end) : undefined,
  };
}

/** The role of message `k`, from the scan (no parse); undefined past the end or when it has none. */
export function roleAt(req: Pick<FixRequest, 'prefix'>, k: number): string | undefined {
  const { root, bytes } = req.prefix.body;
  const node = root.members.get('messages');
  const item = node?.type === 'array' ? node.items[k] : undefined;
  const role = item?.type === 'object' ? item.members.get('role') : undefined;
  return role?.type === 'leaf' && role.first === 0x22 ? decodeKey(bytes, role.start, role.end) : undefined;
}

/** The blocks of a message (a string content is one text block). */
export function blocksOf(m: Message): Json[] {
  return typeof m.content === 'string' ? [{ type: 'text', text: m.content }] : m.content.filter(isObj);
}

/** One content unit of the history: its role, its identity (the prefix model's) and the block as sent. */
export interface Unit {
  role: string;
  id: string;
  block: Json;
}

/**
 * The history's content units, message by message, with the identities the prefix model gave them. A
 * message with empty content has no units (the prefix model keeps it as one `empty` block).
 */
export function historyUnits(prefix: Prefix, messages: readonly Message[]): Unit[][] {
  const byMessage: string[][] = messages.map(() => []);
  const { start, end } = prefix.levels.messages;
  for (let i = start; i < end; i++) {
    const b = prefix.blocks[i];
    if (!b || b.kind === 'empty' || b.messageIndex === undefined) continue;
    byMessage[b.messageIndex]?.push(b.contentHash);
  }
  return messages.map((m, k) => {
    const ids = byMessage[k] ?? [];
    const blocks = blocksOf(m);
    if (ids.length !== blocks.length)
      throw new CachewardError(
        'CW_FIX_INPUT',
        `message ${k}: ${blocks.length} blocks but ${ids.length} identities in the prefix model`,
      );
    return blocks.map((block, j) => ({ role: m.role, id: ids[j] as string, block }));
  });
}

/** A message's shape as the prefix model saw it: role, string content, its units' identities. */
export interface MessageShape {
  role: string;
  string: boolean;
  ids: string[];
}

/**
 * Every message's shape, from the prefix model and its scan alone (no parse): what {@link historyUnits}
 * gives minus the blocks. Undefined when a message has no content array or string (the slow path decides).
 * A message whose scan node was taken over from an earlier body (the same bytes at the same place) gets the
 * shape object it had then: only new messages are read, and an unchanged one is the same object (so the
 * state that holds it is shared and persisted without being looked into again). Shapes are read-only.
 */
export function historyShapes(prefix: Prefix): MessageShape[] | undefined {
  return drainSteps(historyShapesSteps(prefix));
}

/**
 * {@link historyShapes} in bounded steps (it yields every {@link STEP_ITEMS} messages or blocks it reads), so
 * a huge history seen for the first time is read over many turns of a caller's event loop. The same shapes.
 */
export function* historyShapesSteps(prefix: Prefix): Generator<void, MessageShape[] | undefined> {
  const { root, bytes } = prefix.body;
  const node = root.members.get('messages');
  if (node?.type !== 'array') return undefined;
  const items = node.items;
  const memo = shapeMemo(prefix.format);
  const byList = listMemo(prefix.format);
  const known = byList.get(items);
  if (known) return known;
  // The leading messages the scan took over in one go from an earlier body whose shapes were read: their
  // shapes are that body's, copied at once (a body that extends it looks only at its new messages).
  const taken = itemsTakenOver(items);
  const before = taken ? byList.get(taken.from) : undefined;
  const leading = before && taken ? Math.min(taken.count, before.length) : 0;
  const shapes: MessageShape[] = leading ? (before?.slice(0, leading) ?? []) : [];
  shapes.length = items.length;
  // The first message not known from an earlier body: from it on, shapes are read from the prefix.
  let firstNew = items.length;
  const isNew: boolean[] = [];
  for (let k = leading; k < items.length; k++) {
    if ((k - leading) % STEP_ITEMS === STEP_ITEMS - 1) yield;
    const m = items[k] as ScanNode;
    const known = memo.get(m);
    if (known) {
      shapes[k] = known;
      continue;
    }
    if (m.type !== 'object') return undefined;
    const role = m.members.get('role');
    const content = m.members.get('content');
    if (role?.type !== 'leaf' || role.first !== 0x22 || !content) return undefined;
    const string = content.type === 'leaf' && content.first === 0x22;
    if (!string && content.type !== 'array') return undefined;
    shapes[k] = { role: decodeKey(bytes, role.start, role.end), string, ids: [] };
    isNew[k] = true;
    if (firstNew === items.length) firstNew = k;
  }
  if (firstNew === items.length) {
    byList.set(items, shapes);
    return shapes;
  }
  // The new messages' identities, in order: the messages level's blocks from the first new message on.
  const { start, end } = prefix.levels.messages;
  let from = end;
  while (from > start) {
    const b = prefix.blocks[from - 1] as PrefixBlock;
    if (b.messageIndex !== undefined && b.messageIndex < firstNew) break;
    from--;
  }
  for (let i = from; i < end; i++) {
    if ((i - from) % STEP_ITEMS === STEP_ITEMS - 1) yield;
    const b = prefix.blocks[i] as PrefixBlock;
    if (b.kind === 'empty' || b.messageIndex === undefined) continue;
    if (isNew[b.messageIndex]) shapes[b.messageIndex]?.ids.push(b.contentHash);
  }
  for (let k = firstNew; k < items.length; k++) {
    if ((k - firstNew) % STEP_ITEMS === STEP_ITEMS - 1) yield;
    const m = items[k] as ScanNode;
    const shape = shapes[k] as MessageShape;
    if (!isNew[k]) continue;
    const content = m.type === 'object' ? m.members.get('content') : undefined;
    const blocks = content?.type === 'array' ? content.items.filter((x) => x.type === 'object').length : 1;
    if (shape.ids.length !== blocks)
      throw new CachewardError(
        'CW_FIX_INPUT',
        `message ${k}: ${blocks} blocks but ${shape.ids.length} identities in the prefix model`,
      );
    memo.set(m, shape);
  }
  byList.set(items, shapes);
  return shapes;
}

/** Every message's shapes by the scan's item list they were read from, per format (weak, as above). */
const listMemos = new Map<string, WeakMap<readonly ScanNode[], MessageShape[]>>();
function listMemo(format: string): WeakMap<readonly ScanNode[], MessageShape[]> {
  let memo = listMemos.get(format);
  if (!memo) {
    memo = new WeakMap();
    listMemos.set(format, memo);
  }
  return memo;
}

/**
 * Message shapes by the scan node they were read from, per format (a node's units are read per format).
 * Weak: a node goes with the last body that holds it.
 */
const shapeMemos = new Map<string, WeakMap<ScanNode, MessageShape>>();
function shapeMemo(format: string): WeakMap<ScanNode, MessageShape> {
  let memo = shapeMemos.get(format);
  if (!memo) {
    memo = new WeakMap();
    shapeMemos.set(format, memo);
  }
  return memo;
}

/**
 * Whether two tool definitions say the same thing to the model (key order aside): a semantic test for
 * tools-freeze, not a cache identity (the cache sees key order; the frozen bytes are what it gets).
 */
export function sameDefinition(a: Json, b: Json): boolean {
  if (a === b || sameDefinitions.get(a)?.has(b)) return true;
  const { cache_control: _a, defer_loading: _da, ...ra } = a;
  const { cache_control: _b, defer_loading: _db, ...rb } = b;
  // The same members in the same order say the same thing, and native JSON.stringify tells that fast (it
  // was a sorted stringify of every tool, twice, on each request); only a difference is looked at sorted.
  const same = JSON.stringify(ra) === JSON.stringify(rb) || stableJson(ra) === stableJson(rb);
  if (same) {
    let known = sameDefinitions.get(a);
    if (!known) {
      known = new WeakSet();
      sameDefinitions.set(a, known);
    }
    known.add(b);
  }
  return same;
}

/**
 * Pairs of definitions found the same (values are never mutated): a frozen tool and the client's equal one,
 * parsed once and resent on every request, are compared once. Weak: they go with the state and the parse.
 */
const sameDefinitions = new WeakMap<Json, WeakSet<Json>>();

export const TOOL_CHANGES_BETA = 'mid-conversation-tool-changes-2026-07-01';

/** Adds a value to a comma-separated anthropic-beta header. */
export function withBeta(header: string | undefined, beta: string): string {
  const values = (header ?? '')
    .split(',')
    .map((v) => v.trim())
    .filter(Boolean);
  if (!values.includes(beta)) values.push(beta);
  return values.join(',');
}
