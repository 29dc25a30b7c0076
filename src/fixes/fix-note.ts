// What a fix reports about one request: the changes it declares and the note the capture keeps of it.
// Types and which notes are fixes' own; never imports a fix, so fix.ts, the record and the report can use it.

/**
 * A change a fix declares. `insert-message`: a message the client did not send, at this index of the
 * forwarded messages. `restructure`: the same content units in a different message shape. `tools`: the
 * forwarded tools[] differs from the client's (frozen, sorted, or with deferred additions). `ttl`: cache
 * marker lifetimes changed. `beta`: an anthropic-beta value was added. `system`: a system block the
 * client sent is not forwarded (what and why in `detail`).
 */
export type DeclaredChange =
  | { kind: 'insert-message'; index: number }
  | { kind: 'restructure' }
  | { kind: 'tools'; detail: string }
  | { kind: 'ttl'; ttl: string }
  | { kind: 'beta'; value: string }
  | { kind: 'system'; detail: string };

/** A fix that ran on the request, with what it did (the capture keeps it). */
export interface FixNote {
  fix: string;
  changed: boolean;
  notes: string[];
  /** The changes the fix declared (which, what, where). */
  changes?: DeclaredChange[];
  /** Its byte patches, as `[start, end, length written]` in the bytes it received. */
  patches?: Array<[number, number, number]>;
  /**
   * The provider refused the request this fix changed (its status and message): the client's own bytes went
   * out instead, and the fix is off for the conversation on this model.
   */
  refused?: { status: number; message: string };
  error?: string;
}

/** Notes that are not a fix's own (the pipeline, the stability guard, the state): never counted as fixes. */
export const NOT_FIXES: ReadonlySet<string> = new Set(['pipeline', 'guard', 'state']);

/** Whether a note says a fix changed the request (what went out was its fixed form). */
export function fixChanged(note: Pick<FixNote, 'fix' | 'changed'>): boolean {
  return note.changed && !NOT_FIXES.has(note.fix);
}
