// What a fix changes, as byte patches on the body it received; applying them, and following a chain of them
// back to the client's bytes. Pure. It never writes a byte no patch names: everything else is copied as sent.

import { CachewardError } from '../core/errors.js';
import { concatBody } from './body-buffer.js';

/**
 * One change a fix declares: `[start, end)` of the bytes it received is replaced by `text` (an insertion when
 * `start === end`, a removal when `text` is empty). A fix's patches are sorted by `start` and never overlap
 * (insertions at one offset go in the order given).
 */
export interface BytePatch {
  start: number;
  end: number;
  text: Uint8Array | string;
}

/**
 * One change in the client's bytes after every fix ran: `[start, end)` of the client's body became
 * `[at, at + length)` of the forwarded body. Everything outside these ranges is the client's bytes, copied.
 */
export interface ClientEdit {
  start: number;
  end: number;
  at: number;
  length: number;
}

/** Patches that cannot be applied: out of range, unsorted or overlapping. The fix stage fails open on it. */
export class PatchError extends CachewardError {
  constructor(message: string) {
    super('CW_FIX_PATCH', message);
  }
}

const asBytes = (text: Uint8Array | string): Uint8Array =>
  typeof text === 'string' ? Buffer.from(text) : text;

/** Throws a {@link PatchError} unless `patches` are in range, sorted and apart. */
export function checkPatches(length: number, patches: readonly BytePatch[]): void {
  let pos = 0;
  for (const [i, p] of patches.entries()) {
    if (!(Number.isInteger(p.start) && Number.isInteger(p.end) && p.start <= p.end && p.end <= length))
      throw new PatchError(`patch ${i} ([${p.start}, ${p.end})) is outside the body (${length} bytes)`);
    if (p.start < pos)
      throw new PatchError(`patch ${i} ([${p.start}, ${p.end})) overlaps or precedes the one before it`);
    pos = p.end;
  }
}

/** `bytes` with `patches` applied (checked first); the bytes between them are copied as they are. */
export function applyPatches(bytes: Buffer, patches: readonly BytePatch[]): Buffer {
  checkPatches(bytes.length, patches);
  const parts: Uint8Array[] = [];
  let pos = 0;
  for (const p of patches) {
    parts.push(bytes.subarray(pos, p.start), asBytes(p.text));
    pos = p.end;
  }
  parts.push(bytes.subarray(pos));
  return concatBody(parts);
}

/** A run of the forwarded body: the client's bytes `[from, to)`, or text a fix wrote. */
type Piece = { from: number; to: number } | { text: Uint8Array };

const lengthOf = (p: Piece) => ('text' in p ? p.text.length : p.to - p.from);
const sliceOf = (p: Piece, a: number, b: number): Piece =>
  'text' in p ? { text: p.text.subarray(a, b) } : { from: p.from + a, to: p.from + b };

/**
 * The body as the fixes made it so far, as runs of the client's bytes and written text: each fix's patches
 * (in the bytes that fix received) are applied to it in turn, so the whole chain can be told in the client's
 * bytes ({@link edits}).
 */
export class PatchTrail {
  private pieces: Piece[];

  constructor(private readonly clientLength: number) {
    this.pieces = clientLength ? [{ from: 0, to: clientLength }] : [];
  }

  /** Applies one fix's patches (checked against the current body by the caller). */
  apply(patches: readonly BytePatch[]): void {
    const out: Piece[] = [];
    const pieces = this.pieces;
    let i = 0;
    let offset = 0;
    let pos = 0;
    const walk = (until: number, keep: boolean) => {
      while (pos < until && i < pieces.length) {
        const p = pieces[i] as Piece;
        const len = lengthOf(p);
        const b = Math.min(len, until - offset);
        if (keep && b > pos - offset) out.push(sliceOf(p, pos - offset, b));
        pos = offset + b;
        if (b === len) {
          offset += len;
          i++;
        }
      }
    };
    for (const patch of patches) {
      walk(patch.start, true);
      walk(patch.end, false);
      const text = asBytes(patch.text);
      if (text.length) out.push({ text });
    }
    walk(Number.POSITIVE_INFINITY, true);
    this.pieces = out;
  }

  /** The changes in the client's bytes, in order (what {@link ClientEdit} says). */
  edits(): ClientEdit[] {
    const out: ClientEdit[] = [];
    let client = 0;
    let at = 0;
    let open: ClientEdit | undefined;
    for (const p of this.pieces) {
      if ('text' in p) {
        open ??= { start: client, end: client, at, length: 0 };
        open.length += p.text.length;
        at += p.text.length;
        continue;
      }
      if (p.from !== client || open) {
        const edit = open ?? { start: client, end: client, at, length: 0 };
        edit.end = p.from;
        out.push(edit);
        open = undefined;
      }
      client = p.to;
      at += p.to - p.from;
    }
    if (open || client !== this.clientLength) {
      const edit = open ?? { start: client, end: client, at, length: 0 };
      edit.end = this.clientLength;
      out.push(edit);
    }
    return out;
  }
}

/**
 * Where `forwarded` differs from `client` outside the declared `edits` (a sentence), or undefined when every
 * byte outside them is the client's, in order. What the replay gate's fidelity check asks.
 */
export function undeclaredDifference(
  client: Uint8Array,
  forwarded: Uint8Array,
  edits: readonly ClientEdit[],
): string | undefined {
  let c = 0;
  let f = 0;
  const a = Buffer.from(client.buffer, client.byteOffset, client.byteLength);
  const b = Buffer.from(forwarded.buffer, forwarded.byteOffset, forwarded.byteLength);
  const same = (until: number): string | undefined => {
    const n = until - c;
    if (f + n > b.length) return `the forwarded body ends inside the client's bytes [${c}, ${until})`;
    if (a.compare(b, f, f + n, c, until) !== 0) {
      let k = 0;
      while (a[c + k] === b[f + k]) k++;
      return `client byte ${c + k} is forwarded changed (at ${f + k}) outside every declared change`;
    }
    c = until;
    f += n;
    return undefined;
  };
  for (const e of edits) {
    if (e.start < c || e.at !== f + (e.start - c))
      return `declared change [${e.start}, ${e.end}) is out of order or misplaced`;
    const bad = same(e.start);
    if (bad) return bad;
    c = e.end;
    f = e.at + e.length;
  }
  const bad = same(client.length);
  if (bad) return bad;
  return f === forwarded.length
    ? undefined
    : `the forwarded body has ${forwarded.length - f} bytes past the client's end that no change declares`;
}
