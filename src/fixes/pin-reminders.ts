// pin-reminders: keeps the history's first-seen message shape when the client re-serializes it (a
// <system-reminder> moved into its own message, merged into a neighbour, string versus array). Pure.
// Its state holds roles, shapes and the prefix model's block identities (hashes), never message text; the
// messages it restores are made of the client's own block bytes (Anthropic Messages only).

import { drainSteps } from '../core/steps.js';
import type { Prefix, PrefixBlock } from '../prefix/build-prefix.js';
import { decodeKey, type ScanNode } from '../wire/json-scan.js';
import type { ByteSpan } from '../wire/request-body.js';
import { historyShapesSteps, type MessageShape } from './anthropic-messages.js';
import type { BytePatch } from './byte-patch.js';
import type { Fix, FixRequest, FixResult } from './fix.js';
import { membersAt } from './json-members.js';

/**
 * The canonical history: each forwarded message's role, form (string or array) and its units' identities.
 * A unit's identity is its content hash in sequence order, so repeated identical reminders stay distinct.
 */
export interface PinState {
  messages: Array<{ role: string; string: boolean; ids: string[] }>;
}

/**
 * When the client's history holds the same content units in the same order as the canonical one, the
 * canonical message shape is restored around the client's own blocks (markers stay where the client put
 * them); new messages are appended as sent. When the content differs (compaction, a real rewrite), the
 * state resets honestly to what the client sent. Messages carrying cache_control are never reshaped.
 */
export const pinReminders: Fix<PinState> = {
  name: 'pin-reminders',
  description: 'keep the first-seen message shape of a re-serialized history (system reminders)',
  initialState: () => ({ messages: [] }),
  apply(req, state) {
    return drainSteps(pinSteps(req, state));
  },
  applySteps: (req, state) => pinSteps(req, state),
};

/** {@link pinReminders}' apply in steps: the history's shapes are read a few hundred messages at a time. */
function* pinSteps(req: FixRequest, state: PinState): Generator<void, FixResult<PinState>> {
  if (req.prefix.format !== 'anthropic-messages') return { state, notes: [] };
  // The common case, read from the prefix model alone: the history already has the canonical shape.
  const shapes = yield* historyShapesSteps(req.prefix);
  if (shapes) {
    // No canonical units yet: start from the client's shapes (as the slow path's fresh start does).
    if (!state.messages.some((cm) => cm.ids.length > 0)) return { state: { messages: shapes }, notes: [] };
    // Already canonical implies the units extend the canonical ones: the cheap test (shared shape objects
    // for unchanged messages) goes first.
    if (alreadyCanonical(state, shapes))
      return { state: { messages: withCanonical(state.messages, shapes) }, notes: [] };
    if (!unitsExtend(state, shapes))
      return {
        state: { messages: shapes },
        notes: ['history no longer matches the pinned one (compaction or a rewrite): pins reset'],
      };
  }
  const client = clientHistory(req.prefix);
  if (!client) return { state, notes: [] };
  const { messages, items } = client;
  const units = messages.flatMap((m) => m.units);
  const canonicalUnits = state.messages.flatMap((m) => m.ids.map((id) => ({ role: m.role, id })));
  const shapeOf = (m: ClientMessage): MessageShape => ({
    role: m.role,
    string: m.string,
    ids: m.units.map((x) => x.id),
  });
  const fresh = (): PinState => ({ messages: messages.map(shapeOf) });
  // The canonical history must be a prefix of the client's, unit by unit.
  const n = canonicalUnits.length;
  const same =
    n > 0 &&
    n <= units.length &&
    canonicalUnits.every((u, i) => u.role === units[i]?.role && u.id === units[i]?.id);
  if (!same) {
    const notes =
      n > 0 ? ['history no longer matches the pinned one (compaction or a rewrite): pins reset'] : [];
    return { state: fresh(), notes };
  }
  // Rebuild the shared part in the canonical shape, from the client's own blocks. Runs of reshaped messages
  // replace the client messages they were made from; a message the client sent in the canonical shape stays
  // its bytes, untouched.
  const bytes = req.prefix.body.bytes;
  const runs: Array<{ from: number; to: number; texts: Buffer[] }> = [];
  let run: { from: number; texts: Buffer[] } | undefined;
  let u = 0;
  // Where the client's messages cover exactly the shared units, message by message, nothing is reshaped.
  let clientMsg = 0;
  let clientUnit = 0;
  for (const cm of state.messages) {
    const blocks = units.slice(u, u + cm.ids.length);
    u += cm.ids.length;
    const original = messages[clientMsg];
    const aligned =
      original && clientUnit === 0 && original.units.length === blocks.length && original.role === cm.role;
    if (aligned) {
      if (run) runs.push({ ...run, to: clientMsg });
      run = undefined;
      clientMsg++;
      continue;
    }
    run ??= { from: clientMsg, texts: [] };
    run.texts.push(messageText(bytes, cm, blocks));
    // Advance the client's message cursor by the units consumed.
    let remaining = cm.ids.length;
    while (remaining > 0 && clientMsg < messages.length) {
      const len = (messages[clientMsg] as ClientMessage).units.length - clientUnit;
      if (len <= remaining) {
        remaining -= len;
        clientMsg++;
        clientUnit = 0;
      } else {
        clientUnit += remaining;
        remaining = 0;
      }
    }
  }
  if (run) runs.push({ ...run, to: clientMsg });
  if (!runs.length) {
    // Already in the canonical shape: extend the canonical history with what is new.
    return { state: fresh(), notes: [] };
  }
  // A reshaped message that carries a marker is never rewritten: give up on this request.
  const touched = messages.slice(0, clientMsg + (clientUnit ? 1 : 0));
  if (touched.some((m) => m.marked)) {
    return {
      state: fresh(),
      notes: ['a re-serialized message carries cache_control: forwarded as sent, pins reset'],
    };
  }
  if (clientUnit !== 0)
    return { state: fresh(), notes: ['the new history splits a pinned message: pins reset'] };
  const tail = messages.slice(clientMsg);
  const next: PinState = { messages: [...state.messages, ...tail.map(shapeOf)] };
  return {
    patches: runs.map((r) => runPatch(items, r)),
    state: next,
    notes: [`restored the first-seen shape of ${state.messages.length} messages`],
    changes: [{ kind: 'restructure' }],
  };
}

/** One content unit of the client's history: its identity (the prefix model's) and where its bytes are. */
interface ClientUnit {
  role: string;
  id: string;
  span: ByteSpan;
  /** The unit is a message's string content (its bytes are a JSON string, not a block). */
  string: boolean;
}

interface ClientMessage {
  role: string;
  string: boolean;
  units: ClientUnit[];
  /** A block of it carries `cache_control`. */
  marked: boolean;
}

/**
 * The client's messages as the prefix model and its scan read them: roles, string or array content, each
 * unit's identity and span. Undefined when the body has no messages array.
 */
function clientHistory(prefix: Prefix): { messages: ClientMessage[]; items: ScanNode[] } | undefined {
  const { root, bytes } = prefix.body;
  const node = root.members.get('messages');
  if (node?.type !== 'array') return undefined;
  const messages: ClientMessage[] = node.items.map((m) => {
    const role = m.type === 'object' ? m.members.get('role') : undefined;
    const content = m.type === 'object' ? m.members.get('content') : undefined;
    return {
      role: role ? decodeKey(bytes, role.start, role.end) : '',
      string: content?.type === 'leaf' && content.first === 0x22,
      units: [],
      marked:
        content?.type === 'array' &&
        content.items.some((b) => b.type === 'object' && b.members.has('cache_control')),
    };
  });
  const { start, end } = prefix.levels.messages;
  for (let i = start; i < end; i++) {
    const b = prefix.blocks[i] as PrefixBlock;
    if (b.kind === 'empty' || b.messageIndex === undefined) continue;
    const m = messages[b.messageIndex];
    if (!m) continue;
    m.units.push({ role: m.role, id: b.contentHash, span: b.span, string: m.string });
  }
  return { messages, items: node.items };
}

/** A unit as a content block: its bytes, or a string content as the text block it stands for. */
function blockBytes(bytes: Buffer, unit: ClientUnit): Uint8Array[] {
  const raw = bytes.subarray(unit.span.start, unit.span.end);
  return unit.string ? [TEXT_BLOCK_OPEN, raw, CLOSE_OBJECT] : [raw];
}

/** The bytes of a unit's text when it is a plain text block (only `type` and `text`), else undefined. */
function plainText(bytes: Buffer, unit: ClientUnit): Uint8Array | undefined {
  if (unit.string) return bytes.subarray(unit.span.start, unit.span.end);
  const members = membersAt(bytes, unit.span.start, unit.span.end);
  const type = members?.get('type');
  const text = members?.get('text');
  if (members?.size !== 2 || type?.first !== 0x22 || text?.first !== 0x22) return undefined;
  if (decodeKey(bytes, type.start, type.end) !== 'text') return undefined;
  return bytes.subarray(text.start, text.end);
}

const TEXT_BLOCK_OPEN = Buffer.from('{"type":"text","text":');
const CLOSE_OBJECT = Buffer.from('}');

/** A canonical message made of the client's blocks: string content when it was a string and can be one. */
function messageText(bytes: Buffer, cm: MessageShape, blocks: readonly ClientUnit[]): Buffer {
  const head = Buffer.from(`{"role":${JSON.stringify(cm.role)},"content":`);
  const only = blocks.length === 1 && cm.string ? plainText(bytes, blocks[0] as ClientUnit) : undefined;
  if (only) return Buffer.concat([head, only, CLOSE_OBJECT]);
  const parts: Uint8Array[] = [head, OPEN_ARRAY];
  blocks.forEach((b, k) => {
    if (k) parts.push(COMMA);
    parts.push(...blockBytes(bytes, b));
  });
  parts.push(CLOSE_ARRAY, CLOSE_OBJECT);
  return Buffer.concat(parts);
}

const OPEN_ARRAY = Buffer.from('[');
const CLOSE_ARRAY = Buffer.from(']');
const COMMA = Buffer.from(',');

/** The patch that puts a run's messages in place of the client messages `[from, to)` it was made from. */
function runPatch(items: readonly ScanNode[], run: { from: number; to: number; texts: Buffer[] }): BytePatch {
  const joined = Buffer.concat(run.texts.flatMap((t, k) => (k ? [COMMA, t] : [t])));
  if (run.to > run.from) {
    return {
      start: (items[run.from] as ScanNode).start,
      end: (items[run.to - 1] as ScanNode).end,
      text: joined,
    };
  }
  // Made of no client message (an empty one): inserted before the next, or after the last.
  const next = items[run.from];
  if (next) return { start: next.start, end: next.start, text: Buffer.concat([joined, COMMA]) };
  const last = items[items.length - 1] as ScanNode;
  return { start: last.end, end: last.end, text: Buffer.concat([COMMA, joined]) };
}

/**
 * Whether the client's history starts with the canonical one message by message (same roles, same units):
 * then nothing is reshaped and the state is the client's shapes. An empty canonical history is not.
 */
/**
 * `shapes` with each message equal in every field to the canonical one at its place given as that very
 * object: a conversation's states so hold one object per message between them, not one per request (the
 * scan hands over equal shapes as one object only where it took the earlier body's nodes over).
 */
function withCanonical(canonical: readonly MessageShape[], shapes: MessageShape[]): MessageShape[] {
  let out: MessageShape[] | undefined;
  for (let k = 0; k < canonical.length && k < shapes.length; k++) {
    const cm = canonical[k] as MessageShape;
    const m = shapes[k] as MessageShape;
    if (m === cm || m.role !== cm.role || m.string !== cm.string || m.ids.length !== cm.ids.length) continue;
    if (!cm.ids.every((id, j) => m.ids[j] === id)) continue;
    out ??= shapes.slice();
    out[k] = cm;
  }
  return out ?? shapes;
}

function alreadyCanonical(state: PinState, shapes: readonly MessageShape[]): boolean {
  const canonical = state.messages;
  if (canonical.length === 0 || canonical.length > shapes.length) return false;
  // Unchanged messages are the very same shape objects (read once per scan node): a pointer compare each,
  // and only the others are compared by value.
  for (let k = 0; k < canonical.length; k++) {
    const cm = canonical[k] as MessageShape;
    const m = shapes[k] as MessageShape;
    if (m === cm) continue;
    if (m.role !== cm.role || m.ids.length !== cm.ids.length || !cm.ids.every((id, j) => m.ids[j] === id))
      return false;
  }
  return true;
}

/** Whether the canonical history's units (role and identity) are a prefix of the client's, unit by unit. */
function unitsExtend(state: PinState, shapes: readonly MessageShape[]): boolean {
  let m = 0;
  let j = 0;
  for (const cm of state.messages) {
    for (const id of cm.ids) {
      while (m < shapes.length && j >= (shapes[m] as MessageShape).ids.length) {
        m++;
        j = 0;
      }
      const shape = shapes[m];
      if (!shape || shape.role !== cm.role || shape.ids[j] !== id) return false;
      j++;
    }
  }
  return true;
}
