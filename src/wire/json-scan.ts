// A structural JSON scanner over UTF-8 bytes: finds the byte spans of the values a request parser asks for.
// It never builds values it was not asked to expand and never copies string contents; leaves are parsed later.

import { JsonSyntaxError, type TextPosition } from '../core/errors.js';
import { locateJsonError } from './json-locate.js';

/** What to expand while scanning: object members by key, or every array item. Anything else is a leaf. */
export interface ScanShape {
  members?: Readonly<Record<string, ScanShape>>;
  items?: ScanShape;
}

/** A scanned value: its byte span `[start, end)`, and children only where the shape asked for them. */
export type ScanNode = ScanObject | ScanArray | ScanLeaf;

export interface ScanObject {
  type: 'object';
  start: number;
  end: number;
  /** Members in the order sent; a repeated key keeps its last value, as `JSON.parse` does. */
  members: Map<string, ScanNode>;
}

export interface ScanArray {
  type: 'array';
  start: number;
  end: number;
  items: ScanNode[];
}

/** A value not expanded: `first` is its first byte (`"`, `{`, `[`, a digit, `-`, `t`, `f`, `n`). */
export interface ScanLeaf {
  type: 'leaf';
  start: number;
  end: number;
  first: number;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const COMMA = 0x2c;
const COLON = 0x3a;

function isWhitespace(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

/**
 * Scans `bytes` (one JSON document) and returns the root node, expanded as `shape` asks.
 * Structure outside leaves is checked strictly; leaf contents are checked when they are parsed
 * (`parseLeaf`), so every byte of a document is validated exactly once by someone.
 */
export function scanJson(bytes: Uint8Array, shape: ScanShape): ScanNode {
  const scanner = new Scanner(bytes);
  const root = scanner.value(scanner.skipWs(0), shape);
  const after = scanner.skipWs(root.end);
  if (after < bytes.length) scanner.fail(after, 'unexpected data after the end of the JSON value');
  return root;
}

class Scanner {
  constructor(private readonly bytes: Uint8Array) {}

  fail(offset: number, detail: string): never {
    // The structural scan found the problem; the exact locator gives the precise position and wording.
    const located = locateJsonError(decodeUtf8(this.bytes, 0, this.bytes.length));
    if (located)
      throw new JsonSyntaxError(
        located.detail,
        byteToPosition(this.bytes, charToByteOffset(this.bytes, located.charOffset)),
      );
    throw new JsonSyntaxError(detail, byteToPosition(this.bytes, offset));
  }

  skipWs(pos: number): number {
    const b = this.bytes;
    while (pos < b.length && isWhitespace(b[pos] as number)) pos++;
    return pos;
  }

  value(pos: number, shape: ScanShape | undefined): ScanNode {
    const c = this.bytes[pos];
    if (c === undefined) this.fail(pos, 'unexpected end of input');
    if (c === OPEN_OBJECT && shape?.members) return this.object(pos, shape.members);
    if (c === OPEN_ARRAY && shape?.items) return this.array(pos, shape.items);
    return { type: 'leaf', start: pos, end: this.skipValue(pos), first: c };
  }

  object(start: number, memberShapes: Readonly<Record<string, ScanShape>>): ScanObject {
    const b = this.bytes;
    const members = new Map<string, ScanNode>();
    let pos = this.skipWs(start + 1);
    if (b[pos] === CLOSE_OBJECT) return { type: 'object', start, end: pos + 1, members };
    for (;;) {
      if (b[pos] !== QUOTE) this.fail(pos, 'expected a string key');
      const keyEnd = this.skipString(pos);
      const key = decodeKey(b, pos, keyEnd);
      pos = this.skipWs(keyEnd);
      if (b[pos] !== COLON) this.fail(pos, "expected ':' after a key");
      pos = this.skipWs(pos + 1);
      const child = this.value(pos, Object.hasOwn(memberShapes, key) ? memberShapes[key] : undefined);
      members.delete(key);
      members.set(key, child);
      pos = this.skipWs(child.end);
      const c = b[pos];
      if (c === COMMA) {
        pos = this.skipWs(pos + 1);
        continue;
      }
      if (c === CLOSE_OBJECT) return { type: 'object', start, end: pos + 1, members };
      this.fail(pos, "expected ',' or '}' in an object");
    }
  }

  array(start: number, itemShape: ScanShape): ScanArray {
    const b = this.bytes;
    const items: ScanNode[] = [];
    let pos = this.skipWs(start + 1);
    if (b[pos] === CLOSE_ARRAY) return { type: 'array', start, end: pos + 1, items };
    for (;;) {
      const child = this.value(pos, itemShape);
      items.push(child);
      pos = this.skipWs(child.end);
      const c = b[pos];
      if (c === COMMA) {
        pos = this.skipWs(pos + 1);
        continue;
      }
      if (c === CLOSE_ARRAY) return { type: 'array', start, end: pos + 1, items };
      this.fail(pos, "expected ',' or ']' in an array");
    }
  }

  /** Returns the offset just past the closing quote of the string opening at `pos`. */
  skipString(pos: number): number {
    const b = this.bytes;
    let q = indexOfByte(b, QUOTE, pos + 1);
    for (;;) {
      if (q < 0) this.fail(pos, 'unterminated string');
      let slashes = 0;
      while (b[q - 1 - slashes] === BACKSLASH) slashes++;
      if (slashes % 2 === 0) return q + 1;
      q = indexOfByte(b, QUOTE, q + 1);
    }
  }

  /** Skips one value of any kind, checking only that brackets balance; its contents are checked when parsed. */
  skipValue(pos: number): number {
    const b = this.bytes;
    const c = b[pos] as number;
    if (c === QUOTE) return this.skipString(pos);
    if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
      const stack: number[] = [c];
      let p = pos + 1;
      while (p < b.length) {
        const d = b[p] as number;
        if (d === QUOTE) {
          p = this.skipString(p);
          continue;
        }
        if (d === OPEN_OBJECT || d === OPEN_ARRAY) stack.push(d);
        else if (d === CLOSE_OBJECT || d === CLOSE_ARRAY) {
          const open = stack.pop();
          if ((d === CLOSE_OBJECT) !== (open === OPEN_OBJECT)) this.fail(p, 'mismatched bracket');
          if (stack.length === 0) return p + 1;
        }
        p++;
      }
      this.fail(b.length, 'unexpected end of input');
    }
    // A number or literal: runs until a delimiter.
    let p = pos;
    while (p < b.length) {
      const d = b[p] as number;
      if (d === COMMA || d === CLOSE_OBJECT || d === CLOSE_ARRAY || isWhitespace(d)) break;
      if (d === QUOTE || d === OPEN_OBJECT || d === OPEN_ARRAY || d === COLON)
        this.fail(p, 'unexpected character');
      p++;
    }
    if (p === pos) this.fail(pos, 'expected a value');
    return p;
  }
}

function indexOfByte(b: Uint8Array, byte: number, from: number): number {
  return b.indexOf(byte, from);
}

function decodeKey(b: Uint8Array, start: number, end: number): string {
  let plain = true;
  for (let i = start + 1; i < end - 1; i++) {
    const c = b[i] as number;
    if (c === BACKSLASH || c >= 0x80) {
      plain = false;
      break;
    }
  }
  if (plain && end - start < 256) return String.fromCharCode(...b.subarray(start + 1, end - 1));
  if (plain) return decodeUtf8(b, start + 1, end - 1);
  return JSON.parse(decodeUtf8(b, start, end)) as string;
}

const decoder = new TextDecoder('utf-8', { fatal: false });

/** Decodes `bytes[start, end)` as UTF-8 text. */
export function decodeUtf8(bytes: Uint8Array, start: number, end: number): string {
  return decoder.decode(bytes.subarray(start, end));
}

/**
 * Parses the leaf (or any span) at `[start, end)` with `JSON.parse`; a syntax error is reported at its
 * exact position in the whole document.
 */
export function parseSpan(bytes: Uint8Array, start: number, end: number): unknown {
  const text = decodeUtf8(bytes, start, end);
  try {
    return JSON.parse(text);
  } catch {
    const located = locateJsonError(text);
    const charOffset = located ? located.charOffset : 0;
    const inSpan = charToByteOffset(bytes.subarray(start, end), charOffset);
    throw new JsonSyntaxError(located?.detail ?? 'invalid value', byteToPosition(bytes, start + inSpan));
  }
}

/** Converts a UTF-16 offset in the decoded text to a byte offset in the UTF-8 bytes. */
export function charToByteOffset(bytes: Uint8Array, charOffset: number): number {
  let chars = 0;
  let i = 0;
  while (i < bytes.length && chars < charOffset) {
    const c = bytes[i] as number;
    const len = c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
    chars += len === 4 ? 2 : 1;
    i += len;
  }
  return i;
}

/** The line and column (both from 1, column in characters) of a byte offset. */
export function byteToPosition(bytes: Uint8Array, offset: number): TextPosition {
  let line = 1;
  let lineStart = 0;
  let nl = bytes.indexOf(0x0a);
  while (nl >= 0 && nl < offset) {
    line++;
    lineStart = nl + 1;
    nl = bytes.indexOf(0x0a, lineStart);
  }
  const column = decodeUtf8(bytes, lineStart, Math.min(offset, bytes.length)).length + 1;
  return { offset, line, column };
}
