// Writes a fix state's JSON in bounded steps, so a state holding a huge history is written a few hundred
// elements at a time between turns of the event loop. It must never write other text than JSON.stringify.

import { createHash } from 'node:crypto';
import { STEP_ITEMS } from '../core/steps.js';

/**
 * `JSON.stringify(value) ?? 'null'` and the sha1 (hex) of that text, in steps: a plain object's long array
 * members are written element by element, yielding every {@link STEP_ITEMS} elements; anything else (and an
 * object or array with its own `toJSON`) is one `JSON.stringify`. The same text, byte for byte.
 *
 * `elements`: the text of each object element of those arrays, written once per object and taken from here
 * the next time (a conversation's next state shares all its earlier messages' objects with the one before).
 * Only for values never changed once written: a caller that passes it says its values are immutable.
 */
export function* jsonAndSha1Steps(
  value: unknown,
  elements?: WeakMap<object, string>,
): Generator<void, { json: string; sha1: string }> {
  const digest = createHash('sha1');
  const whole = (text: string) => {
    digest.update(text);
    return { json: text, sha1: digest.digest('hex') };
  };
  if (!isPlainObject(value)) return whole(JSON.stringify(value) ?? 'null');
  const pieces: string[] = [];
  let written = 0;
  // The digest takes the text a step at a time (one update per step, not one per element).
  let hashed = 0;
  const update = () => {
    if (hashed < pieces.length) digest.update(pieces.slice(hashed).join(''));
    hashed = pieces.length;
  };
  const put = (text: string) => {
    pieces.push(text);
  };
  const element = (e: unknown): string => {
    if (!elements || !e || typeof e !== 'object') return JSON.stringify(e) ?? 'null';
    let text = elements.get(e);
    if (text === undefined) {
      text = JSON.stringify(e) ?? 'null';
      elements.set(e, text);
    }
    return text;
  };
  put('{');
  let first = true;
  // Own enumerable string keys in JSON.stringify's order; members it leaves out are left out.
  for (const [key, member] of Object.entries(value)) {
    if (member === undefined || typeof member === 'function' || typeof member === 'symbol') continue;
    put(`${first ? '' : ','}${JSON.stringify(key)}:`);
    first = false;
    if (!Array.isArray(member) || member.length <= STEP_ITEMS || hasToJson(member)) {
      put(JSON.stringify(member) ?? 'null');
      continue;
    }
    put('[');
    for (let i = 0; i < member.length; i++) {
      // An element JSON.stringify cannot write (undefined, a function) is `null` in an array.
      if (i) put(',');
      put(element(member[i]));
      if (++written % STEP_ITEMS === 0) {
        update();
        yield;
      }
    }
    put(']');
  }
  put('}');
  update();
  return { json: pieces.join(''), sha1: digest.digest('hex') };
}

function hasToJson(v: object): boolean {
  return typeof (v as { toJSON?: unknown }).toJSON === 'function';
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  if (!v || typeof v !== 'object' || Array.isArray(v) || hasToJson(v)) return false;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}
