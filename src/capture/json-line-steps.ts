// A capture record serialized as its JSON line in bounded steps: the same bytes JSON.stringify gives, made
// a few hundred blocks (or 64 K characters of a body) at a time and encoded in pieces. Pure; never reorders.

import { STEP_BYTES, STEP_ITEMS } from '../core/steps.js';

/** Objects this deep are walked key by key (the record, its prefix, its bodies); deeper values are whole. */
const WALK_DEPTH = 3;
/** A string longer than this is escaped in pieces of this many characters. */
const STRING_PIECE = 64 * 1024;
/** Text is encoded to bytes once this much has gathered. */
const ENCODE_AT = 64 * 1024;

/** A line's bytes, in pieces (ending with the newline), and their total length. */
export interface LinePieces {
  pieces: Buffer[];
  bytes: number;
}

/**
 * `JSON.stringify(value) + '\n'` as UTF-8 pieces, in bounded steps: it yields every {@link STEP_ITEMS}
 * array items or {@link STEP_BYTES} characters. Plain objects and arrays near the top are walked (keys in
 * `Object.keys` order, `undefined`, functions and symbols left out of objects and written `null` in
 * arrays, as JSON.stringify does); anything else, and everything deeper, is JSON.stringify's own output.
 * `value` must not change until the steps are done.
 */
export function* jsonLineSteps(value: unknown): Generator<void, LinePieces> {
  const out: LinePieces = { pieces: [], bytes: 0 };
  const text: string[] = [];
  let gathered = 0;
  let work = 0;
  const emit = (s: string) => {
    text.push(s);
    gathered += s.length;
    work++;
    if (gathered >= ENCODE_AT) flush();
  };
  const flush = () => {
    if (!text.length) return;
    const b = Buffer.from(text.join(''));
    text.length = 0;
    gathered = 0;
    out.pieces.push(b);
    out.bytes += b.length;
  };
  let chars = 0;
  const due = (s: number) => {
    chars += s;
    if (work < STEP_ITEMS && chars < STEP_BYTES) return false;
    work = 0;
    chars = 0;
    return true;
  };

  /** Writes `v` (known to serialize to something) at `depth`. */
  function* write(v: unknown, depth: number): Generator<void, void> {
    if (typeof v === 'string' && v.length > STRING_PIECE) {
      yield* longString(v);
      return;
    }
    if (depth >= WALK_DEPTH || v === null || typeof v !== 'object' || !walkable(v)) {
      const s = JSON.stringify(v) as string;
      emit(s);
      if (due(s.length)) yield;
      return;
    }
    if (Array.isArray(v)) {
      emit('[');
      for (let i = 0; i < v.length; i++) {
        if (i) emit(',');
        const item = v[i];
        if (serializes(item)) yield* write(item, depth + 1);
        else emit('null');
      }
      emit(']');
      return;
    }
    emit('{');
    let first = true;
    for (const k of Object.keys(v)) {
      const item = (v as Record<string, unknown>)[k];
      if (!serializes(item)) continue;
      emit(first ? `${JSON.stringify(k)}:` : `,${JSON.stringify(k)}:`);
      first = false;
      yield* write(item, depth + 1);
    }
    emit('}');
  }

  function* longString(v: string): Generator<void, void> {
    emit('"');
    for (let at = 0; at < v.length; ) {
      let end = Math.min(v.length, at + STRING_PIECE);
      // Never between the two halves of a surrogate pair: each half alone would be escaped.
      const c = v.charCodeAt(end - 1);
      if (end < v.length && c >= 0xd800 && c <= 0xdbff) end--;
      const s = JSON.stringify(v.slice(at, end));
      emit(s.slice(1, -1));
      at = end;
      if (due(s.length)) yield;
    }
    emit('"');
  }

  if (serializes(value)) yield* write(value, 0);
  emit('\n');
  flush();
  return out;
}

/** What JSON.stringify writes something for (in an object; in an array the rest are `null`). */
function serializes(v: unknown): boolean {
  return v !== undefined && typeof v !== 'function' && typeof v !== 'symbol';
}

/** A plain object or array with no toJSON of its own: walking it gives what JSON.stringify gives. */
function walkable(v: object): boolean {
  if (typeof (v as { toJSON?: unknown }).toJSON === 'function') return false;
  if (Array.isArray(v)) return true;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}
