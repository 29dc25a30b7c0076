// Member-level changes to one JSON object of a body, as byte patches: a value replaced, a member added after
// the last one, a member taken out with its comma. Pure. Spans come from the scan (wire/json-scan.ts); this
// only steps over the whitespace and punctuation between them, and refuses (undefined) what it cannot place.

import { type ScanNode, scanJson } from '../wire/json-scan.js';
import type { ByteSpan } from '../wire/request-body.js';
import type { BytePatch } from './byte-patch.js';

/** A member's value: its span and first byte. */
export type MemberValue = ByteSpan & { first: number };

const SHAPE = { members: {} };

/**
 * The members of the object at `[start, end)` of `bytes` (values not expanded), offsets in `bytes`; a
 * repeated key keeps its last value, as `JSON.parse` does. Undefined when the span is not an object.
 */
export function membersAt(
  bytes: Uint8Array,
  start: number,
  end: number,
  only?: readonly string[],
): Map<string, MemberValue> | undefined {
  const node = scanJson(bytes.subarray(start, end), only ? { members: {}, only } : SHAPE);
  if (node.type !== 'object') return undefined;
  const out = new Map<string, MemberValue>();
  for (const [key, value] of node.members)
    out.set(key, { start: start + value.start, end: start + value.end, first: firstOf(value) });
  return out;
}

function firstOf(node: ScanNode): number {
  return node.type === 'leaf' ? node.first : node.type === 'object' ? 0x7b : 0x5b;
}

const isSpace = (c: number | undefined) => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;

/**
 * Where the key of the member whose value starts at `valueStart` begins (its opening quote), when that key is
 * written exactly as `JSON.stringify(key)` writes it; undefined otherwise (an escaped key is left alone).
 */
export function keyStartOf(bytes: Uint8Array, valueStart: number, key: string): number | undefined {
  let p = valueStart - 1;
  while (p >= 0 && isSpace(bytes[p])) p--;
  if (bytes[p] !== 0x3a) return undefined;
  p--;
  while (p >= 0 && isSpace(bytes[p])) p--;
  const written = Buffer.from(JSON.stringify(key));
  const start = p - written.length + 1;
  if (start < 1) return undefined;
  for (let k = 0; k < written.length; k++) if (bytes[start + k] !== written[k]) return undefined;
  // The byte before the key (spaces aside) opens the object or follows the member before: then the quote
  // at `start` opens this key and is not the end of a longer one.
  let q = start - 1;
  while (q >= 0 && isSpace(bytes[q])) q--;
  return bytes[q] === 0x7b || bytes[q] === 0x2c ? start : undefined;
}

/**
 * The patch that sets `key` of the object at `object` to the JSON text `value`: its value replaced, or a new
 * member after the last one (or first, in an empty object).
 */
export function setMember(
  object: ByteSpan,
  members: ReadonlyMap<string, ByteSpan>,
  key: string,
  value: string,
): BytePatch {
  const known = members.get(key);
  if (known) return { start: known.start, end: known.end, text: value };
  let last = -1;
  for (const m of members.values()) last = Math.max(last, m.end);
  const member = `${JSON.stringify(key)}:${value}`;
  if (last < 0) return { start: object.start + 1, end: object.start + 1, text: member };
  return { start: last, end: last, text: `,${member}` };
}

/**
 * The patch that takes `key` out of the object (with the comma that joins it to a neighbour), or undefined
 * when it cannot be placed exactly.
 */
export function removeMember(
  bytes: Uint8Array,
  members: ReadonlyMap<string, MemberValue>,
  key: string,
): BytePatch | undefined {
  const value = members.get(key);
  if (!value) return undefined;
  const start = keyStartOf(bytes, value.start, key);
  if (start === undefined) return undefined;
  let q = start - 1;
  while (q >= 0 && isSpace(bytes[q])) q--;
  // After another member: the comma before this one goes with it.
  if (bytes[q] === 0x2c) return { start: q, end: value.end, text: '' };
  let after = value.end;
  while (after < bytes.length && isSpace(bytes[after])) after++;
  if (bytes[after] === 0x7d) return { start, end: value.end, text: '' };
  if (bytes[after] !== 0x2c) return undefined;
  after++;
  while (after < bytes.length && isSpace(bytes[after])) after++;
  return { start, end: after, text: '' };
}
