// Fixes the provider refused, per conversation and model: kept in the conversation's fix state (under its
// own name beside the fixes' states), so every store and every proxy of a fleet honours it. Pure.

import type { Prefix } from '../prefix/build-prefix.js';
import type { FixNote } from './fix-note.js';
import type { ForwardedPair } from './stability.js';

/** The state entry that holds the withdrawn fixes (not a fix name: `:` never is one). */
export const WITHDRAWN = 'cacheward:withdrawn';

/** The fixes withdrawn in a conversation: each for the model it was refused on. */
export interface WithdrawnState {
  refused: Array<{ fix: string; model: string }>;
}

type States = ReadonlyMap<string, unknown>;

function withdrawnOf(states: States | undefined): WithdrawnState | undefined {
  const w = states?.get(WITHDRAWN) as WithdrawnState | undefined;
  return w && Array.isArray(w.refused) ? w : undefined;
}

/** Whether `fix` was withdrawn for `model` in the conversation whose state this is. */
export function isWithdrawn(states: States | undefined, fix: string, model: string | undefined): boolean {
  return withdrawnOf(states)?.refused.some((r) => r.fix === fix && r.model === (model ?? '')) ?? false;
}

/** What a fresh start keeps of a state: only the withdrawals (a refusal is never forgotten by a reset). */
export function withdrawalsOnly(states: States | undefined): Map<string, unknown> {
  const w = states?.get(WITHDRAWN);
  return w === undefined ? new Map() : new Map([[WITHDRAWN, w]]);
}

/**
 * The state a request leaves once the provider refused its fixed form and the client's own bytes went out:
 * the `refused` fixes withdrawn for `model` (their states dropped), the other fixes' states as they ran, and
 * the forwarded pair the client's bytes (what the provider got).
 */
export function afterRefusal(
  after: { states: States; pair: ForwardedPair },
  refused: readonly string[],
  model: string | undefined,
  client: Prefix,
): { states: Map<string, unknown>; pair: ForwardedPair } {
  const states = new Map(after.states);
  for (const fix of refused) states.delete(fix);
  const known = withdrawnOf(after.states)?.refused ?? [];
  const m = model ?? '';
  const added = refused
    .filter((fix) => !known.some((r) => r.fix === fix && r.model === m))
    .map((fix) => ({ fix, model: m }));
  states.set(WITHDRAWN, { refused: [...known, ...added] } satisfies WithdrawnState);
  return { states, pair: { client: client.blocks, forwarded: client.blocks } };
}

/**
 * The notes of a request whose fixed form the provider refused: each fix that changed it is marked refused
 * ("fix refused by the provider") and no longer changed (the client's own bytes went out); the others as
 * they were. `names` are the fixes that changed it.
 */
export function refusedNotes(
  notes: readonly FixNote[],
  names: readonly string[],
  refusal: { status: number; message: string },
  model: string | undefined,
): FixNote[] {
  return notes.map((n) =>
    names.includes(n.fix)
      ? {
          ...n,
          changed: false,
          refused: refusal,
          notes: [
            ...n.notes,
            `fix refused by the provider (${refusal.status}: ${refusal.message}): the client's own request was sent instead; off in this conversation on ${model || 'this model'}`,
          ],
        }
      : n,
  );
}
