// The one length cap for names clients choose (session labels, model names) wherever the proxy keeps or
// shows them. Pure; it never drops the fact that a value was cut, and two long values stay distinct.

import { hash } from 'node:crypto';

/** The longest label kept or shown, in UTF-16 code units. */
export const LABEL_MAX = 128;

/** Characters of the hash suffix that keeps two long labels with the same start apart. */
const SUFFIX = 10;

/**
 * `value` when it is at most `max` long; else its start, an ellipsis and the first hex digits of the whole
 * value's sha256 (`claude-…-very-long…3f9a0c12de`), `max` long in all. The same value always gives the same
 * label, and the ellipsis shows that it was cut.
 */
export function capLabel(value: string, max = LABEL_MAX): string {
  if (value.length <= max) return value;
  let keep = Math.max(0, max - SUFFIX - 1);
  // Never between the two halves of a surrogate pair.
  const c = value.charCodeAt(keep - 1);
  if (c >= 0xd800 && c <= 0xdbff) keep--;
  return `${value.slice(0, keep)}…${hash('sha256', value, 'hex').slice(0, SUFFIX)}`;
}
