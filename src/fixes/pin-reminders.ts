// pin-reminders: keeps the history's first-seen message shape when the client re-serializes it (a
// <system-reminder> moved into its own message, merged into a neighbour, string versus array). Pure.
// Its state holds roles, shapes and the prefix model's block identities (hashes), never message text.

import { drainSteps } from '../wire/json-scan.js';
import {
  bodyOf,
  historyShapesSteps,
  historyUnits,
  type Json,
  type Message,
  type MessageShape,
  marked,
  messagesOf,
  type Unit,
  writeBody,
} from './anthropic-messages.js';
import type { Fix, FixRequest, FixResult } from './fix.js';

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
  // The common case, read from the prefix model alone: the history already has the canonical shape.
  const shapes = yield* historyShapesSteps(req.prefix);
  if (shapes) {
    // No canonical units yet: start from the client's shapes (as the slow path's fresh start does).
    if (!state.messages.some((cm) => cm.ids.length > 0)) return { state: { messages: shapes }, notes: [] };
    // Already canonical implies the units extend the canonical ones: the cheap test (shared shape objects
    // for unchanged messages) goes first.
    if (alreadyCanonical(state, shapes)) return { state: { messages: shapes }, notes: [] };
    if (!unitsExtend(state, shapes))
      return {
        state: { messages: shapes },
        notes: ['history no longer matches the pinned one (compaction or a rewrite): pins reset'],
      };
  }
  const body = bodyOf(req);
  if (!Array.isArray(body.messages)) return { state, notes: [] };
  const messages = messagesOf(body);
  const perMessage = historyUnits(req.prefix, messages);
  const client: Unit[] = perMessage.flat();
  const canonicalUnits = state.messages.flatMap((m) => m.ids.map((id) => ({ role: m.role, id })));
  const shapeOf = (m: Message, k: number) => ({
    role: m.role,
    string: typeof m.content === 'string',
    ids: (perMessage[k] ?? []).map((x) => x.id),
  });
  const fresh = (): PinState => ({ messages: messages.map(shapeOf) });
  // The canonical history must be a prefix of the client's, unit by unit.
  const n = canonicalUnits.length;
  const same =
    n > 0 &&
    n <= client.length &&
    canonicalUnits.every((u, i) => u.role === client[i]?.role && u.id === client[i]?.id);
  if (!same) {
    const notes =
      n > 0 ? ['history no longer matches the pinned one (compaction or a rewrite): pins reset'] : [];
    return { state: fresh(), notes };
  }
  // Rebuild the shared part in the canonical shape, from the client's blocks.
  const out: Message[] = [];
  let u = 0;
  let reshaped = false;
  // Where the client's messages cover exactly the shared units, message by message, nothing is reshaped.
  let clientMsg = 0;
  let clientUnit = 0;
  for (const cm of state.messages) {
    const blocks: Json[] = [];
    for (let k = 0; k < cm.ids.length; k++) blocks.push((client[u++] as { block: Json }).block);
    const original = messages[clientMsg];
    const originalBlocks = original ? (perMessage[clientMsg] ?? []) : [];
    const aligned =
      original && clientUnit === 0 && originalBlocks.length === blocks.length && original.role === cm.role;
    if (aligned) {
      out.push(original as Message);
      clientMsg++;
      continue;
    }
    reshaped = true;
    const plain =
      blocks.length === 1 &&
      blocks[0]?.type === 'text' &&
      blocks[0].cache_control === undefined &&
      Object.keys(blocks[0]).length === 2;
    out.push({ role: cm.role, content: cm.string && plain ? String(blocks[0]?.text) : blocks });
    // Advance the client's message cursor by the units consumed.
    let remaining = cm.ids.length;
    while (remaining > 0 && clientMsg < messages.length) {
      const len = (perMessage[clientMsg] ?? []).length - clientUnit;
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
  if (!reshaped) {
    // Already in the canonical shape: extend the canonical history with what is new.
    return { state: fresh(), notes: [] };
  }
  // A reshaped message that carries a marker is never rewritten: give up on this request.
  const touched = messages.slice(0, clientMsg + (clientUnit ? 1 : 0));
  if (touched.some(marked)) {
    return {
      state: fresh(),
      notes: ['a re-serialized message carries cache_control: forwarded as sent, pins reset'],
    };
  }
  if (clientUnit !== 0)
    return { state: fresh(), notes: ['the new history splits a pinned message: pins reset'] };
  const tail = messages.slice(clientMsg);
  const forwarded = [...out, ...tail];
  const next: PinState = {
    messages: [...state.messages, ...tail.map((m, j) => shapeOf(m, clientMsg + j))],
  };
  return {
    body: writeBody({ ...body, messages: forwarded as unknown as Json[] }),
    state: next,
    notes: [`restored the first-seen shape of ${state.messages.length} messages`],
    changes: [{ kind: 'restructure' }],
  };
}

/**
 * Whether the client's history starts with the canonical one message by message (same roles, same units):
 * then nothing is reshaped and the state is the client's shapes. An empty canonical history is not.
 */
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
