// A structural JSON scanner over UTF-8 bytes: finds the byte spans of the values a request parser asks for.
// It never builds values it was not asked to expand and never copies string contents; leaves are parsed later.

import { JsonDepthError, JsonSyntaxError, type TextPosition } from '../core/errors.js';
import { drainSteps, STEP_BYTES, STEP_ITEMS } from '../core/steps.js';
import { locateJsonError } from './json-locate.js';

/** What to expand while scanning: object members by key, or every array item. Anything else is a leaf. */
export interface ScanShape {
  members?: Readonly<Record<string, ScanShape>>;
  items?: ScanShape;
  /**
   * With `members`: record only these keys (as leaves unless `members` expands them); the other members
   * are checked and skipped without a node. For hot paths where a few fields of many objects matter.
   */
  only?: readonly string[];
}

/** A scanned value: its byte span `[start, end)`, and children only where the shape asked for them. */
export type ScanNode = ScanObject | ScanArray | ScanLeaf;

/**
 * `clean` on every node: the value's bytes are exactly what `JSON.stringify(JSON.parse(bytes))` would
 * write (no insignificant whitespace, no `\u` or `\/` escapes, integers of at most 15 digits, valid
 * literals, no integer-like keys). Clean bytes can be hashed as they are, without a parse.
 */
export interface ScanObject {
  type: 'object';
  start: number;
  end: number;
  clean: boolean;
  /** Members in the order sent; a repeated key keeps its last value, as `JSON.parse` does. */
  members: Map<string, ScanNode>;
}

export interface ScanArray {
  type: 'array';
  start: number;
  end: number;
  clean: boolean;
  items: ScanNode[];
}

/** A value not expanded: `first` is its first byte (`"`, `{`, `[`, a digit, `-`, `t`, `f`, `n`). */
export interface ScanLeaf {
  type: 'leaf';
  start: number;
  end: number;
  clean: boolean;
  first: number;
}

/**
 * The deepest nesting of arrays and objects a document may have (model choice: neither provider documents
 * one; 512 is far beyond any real tool schema and far below what recursive code downstream can handle).
 */
export const MAX_JSON_DEPTH = 512;

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
export function scanJson(
  bytes: Uint8Array,
  shape: ScanShape,
  maxDepth = MAX_JSON_DEPTH,
  previous?: PreviousScan,
): ScanNode {
  return drainSteps(scanJsonSteps(bytes, shape, maxDepth, previous));
}

/**
 * {@link scanJson} in bounded steps: it yields between items of the root's arrays (every
 * {@link STEP_ITEMS} items or {@link STEP_BYTES} bytes), so a caller can spread a huge body over many
 * turns of its event loop. The same scan: `scanJson` is this, run to the end.
 */
export function* scanJsonSteps(
  bytes: Uint8Array,
  shape: ScanShape,
  maxDepth = MAX_JSON_DEPTH,
  previous?: PreviousScan,
): Generator<void, ScanNode> {
  const scanner = new Scanner(bytes, maxDepth, previous);
  const root = yield* scanner.outerValue(scanner.skipWs(0), shape, 0, previous?.root);
  const after = scanner.skipWs(root.end);
  if (after < bytes.length) scanner.fail(after, 'unexpected data after the end of the JSON value');
  return root;
}

/**
 * An earlier scan of a document with the same shape and depth limit, and how many leading bytes the two
 * documents share: a node of the earlier scan that ends inside the shared bytes is the node this scan
 * would build at that place (same bytes before it, same bytes in it), so it is taken as it is.
 */
export interface PreviousScan {
  root: ScanNode;
  sameBytes: number;
}

/** Bytes per native compare while counting shared leading bytes. */
const SHARED_CHUNK = 64 * 1024;

/** How many leading bytes `a` and `b` share (native compares only: O(n / 64 KB + log n) calls). */
export function sharedByteCount(a: Uint8Array, b: Uint8Array): number {
  const x = Buffer.from(a.buffer, a.byteOffset, a.byteLength);
  const y = Buffer.from(b.buffer, b.byteOffset, b.byteLength);
  const n = Math.min(x.length, y.length);
  // Native compares of 64 KB chunks up to the one holding the first difference (each shared byte read
  // once), then halves that chunk with native compares and walks the last few bytes: never a
  // byte-by-byte walk of the body.
  let lo = 0;
  let hi = n;
  for (; lo < n; lo += SHARED_CHUNK) {
    const end = Math.min(n, lo + SHARED_CHUNK);
    if (x.compare(y, lo, end, lo, end) !== 0) {
      hi = end;
      break;
    }
  }
  if (lo >= n) return n;
  while (hi - lo > 64) {
    const mid = (lo + hi) >>> 1;
    if (x.compare(y, lo, mid, lo, mid) === 0) lo = mid;
    else hi = mid;
  }
  while (lo < hi && x[lo] === y[lo]) lo++;
  return lo;
}

/**
 * For each array a stepped scan built at the root's members: how many of its leading items have every byte
 * from its `[` to their end clean, so a later scan that takes those items over knows its own `clean`.
 */
const cleanRuns = new WeakMap<ScanArray, number>();

/**
 * Item lists that begin with an earlier scan's items: which list, and how many of its items. The earlier
 * list is held weakly: a strong reference would chain every earlier scan of a conversation to the newest
 * (each list keeping the one it took over from alive), so a conversation's old scans were never freed.
 */
const takenItems = new WeakMap<readonly ScanNode[], { from: WeakRef<readonly ScanNode[]>; count: number }>();

/**
 * How many leading items of `items` (an array node's items) are the very items of `from` (an earlier
 * scan's array at the same place), when the scan took them over in one go; undefined when it did not.
 */
export function itemsTakenOver(
  items: readonly ScanNode[],
): { from: readonly ScanNode[]; count: number } | undefined {
  const t = takenItems.get(items);
  const from = t?.from.deref();
  return t && from ? { from, count: t.count } : undefined;
}

/** {@link itemsTakenOver} for one earlier list: the count when `items` begins with `from`'s items. */
export function itemsTakenFrom(items: readonly ScanNode[], from: readonly ScanNode[]): number | undefined {
  const t = takenItems.get(items);
  return t && t.from.deref() === from ? t.count : undefined;
}

class Scanner {
  /** Whether everything scanned since the current value began is canonical (see {@link ScanObject}). */
  private clean = true;
  /** The next backslash at or after the scan position (or Infinity): escapes are found in O(n) overall. */
  private nextBackslash: number;

  /** Bytes shared with the previous scan's document (0: nothing is taken over). */
  private readonly sameBytes: number;

  constructor(
    private readonly bytes: Uint8Array,
    private readonly maxDepth: number,
    previous?: PreviousScan,
  ) {
    const nb = bytes.indexOf(BACKSLASH);
    this.nextBackslash = nb < 0 ? Number.POSITIVE_INFINITY : nb;
    this.sameBytes = previous?.sameBytes ?? 0;
  }

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
    const from = pos;
    while (pos < b.length && isWhitespace(b[pos] as number)) pos++;
    if (pos !== from) this.clean = false;
    return pos;
  }

  /** Nesting went past the limit at `offset`: a precise error instead of a stack overflow downstream. */
  tooDeep(offset: number): never {
    throw new JsonDepthError(this.maxDepth, byteToPosition(this.bytes, offset));
  }

  /** The value at `pos`, which sits inside `depth` open arrays and objects. */
  value(pos: number, shape: ScanShape | undefined, depth: number, prev?: ScanNode): ScanNode {
    if (prev !== undefined && prev.start === pos && prev.end < this.sameBytes) {
      // The earlier scan's node for these very bytes at this very place: taken over, not rescanned.
      if (!prev.clean) this.clean = false;
      if (this.nextBackslash < prev.end) {
        const nb = this.bytes.indexOf(BACKSLASH, prev.end);
        this.nextBackslash = nb < 0 ? Number.POSITIVE_INFINITY : nb;
      }
      return prev;
    }
    const earlier = prev !== undefined && prev.start === pos ? prev : undefined;
    const c = this.bytes[pos];
    if (c === undefined) this.fail(pos, 'unexpected end of input');
    const outer = this.clean;
    this.clean = true;
    let node: ScanNode;
    if ((c === OPEN_OBJECT || c === OPEN_ARRAY) && depth >= this.maxDepth) this.tooDeep(pos);
    if (c === OPEN_OBJECT && shape?.members)
      node = this.object(
        pos,
        shape.members,
        depth + 1,
        shape.only,
        earlier?.type === 'object' ? earlier : undefined,
      );
    else if (c === OPEN_ARRAY && shape?.items)
      node = this.array(pos, shape.items, depth + 1, earlier?.type === 'array' ? earlier : undefined);
    else node = { type: 'leaf', start: pos, end: this.skipValue(pos, depth), first: c, clean: true };
    node.clean = this.clean;
    this.clean = outer && this.clean;
    return node;
  }

  /**
   * {@link value} for the root and its members (depth 0 and 1), in steps: an expanded array there yields
   * between its items; everything deeper is scanned by `value` at once. Same nodes, same checks.
   */
  *outerValue(
    pos: number,
    shape: ScanShape | undefined,
    depth: number,
    prev?: ScanNode,
  ): Generator<void, ScanNode> {
    const c = this.bytes[pos];
    const taken = prev !== undefined && prev.start === pos && prev.end < this.sameBytes;
    const expands = (c === OPEN_OBJECT && shape?.members) || (c === OPEN_ARRAY && shape?.items);
    if (depth > 1 || taken || !expands || depth >= this.maxDepth) return this.value(pos, shape, depth, prev);
    const earlier = prev !== undefined && prev.start === pos ? prev : undefined;
    const outer = this.clean;
    this.clean = true;
    let node: ScanNode;
    if (c === OPEN_OBJECT && shape?.members)
      node = yield* this.outerObject(
        pos,
        shape.members,
        depth + 1,
        shape.only,
        earlier?.type === 'object' ? earlier : undefined,
      );
    else
      node = yield* this.outerArray(
        pos,
        shape?.items as ScanShape,
        depth + 1,
        earlier?.type === 'array' ? earlier : undefined,
      );
    node.clean = this.clean;
    this.clean = outer && this.clean;
    return node;
  }

  /** {@link object} for the root: its members through {@link outerValue}. */
  private *outerObject(
    start: number,
    memberShapes: Readonly<Record<string, ScanShape>>,
    depth: number,
    only?: readonly string[],
    prev?: ScanObject,
  ): Generator<void, ScanObject> {
    if (only) return this.object(start, memberShapes, depth, only, prev);
    const b = this.bytes;
    const members = new Map<string, ScanNode>();
    let pos = this.skipWs(start + 1);
    if (b[pos] === CLOSE_OBJECT) return { type: 'object', start, end: pos + 1, members, clean: true };
    for (;;) {
      if (b[pos] !== QUOTE) this.fail(pos, 'expected a string key');
      const keyEnd = this.skipString(pos);
      const key = decodeKey(b, pos, keyEnd);
      if (isDigit(b[pos + 1])) this.clean = false;
      pos = this.skipWs(keyEnd);
      if (b[pos] !== COLON) this.fail(pos, "expected ':' after a key");
      pos = this.skipWs(pos + 1);
      const child = yield* this.outerValue(
        pos,
        Object.hasOwn(memberShapes, key) ? memberShapes[key] : undefined,
        depth,
        prev?.members.get(key),
      );
      // A repeated key: JSON.parse keeps one, so these bytes are not what JSON.stringify would write.
      if (members.delete(key)) this.clean = false;
      members.set(key, child);
      pos = this.skipWs(child.end);
      const c = b[pos];
      if (c === COMMA) {
        pos = this.skipWs(pos + 1);
        continue;
      }
      if (c === CLOSE_OBJECT) return { type: 'object', start, end: pos + 1, members, clean: true };
      this.fail(pos, "expected ',' or '}' in an object");
    }
  }

  /** {@link array} for a member of the root: yields every few items. */
  private *outerArray(
    start: number,
    itemShape: ScanShape,
    depth: number,
    prev?: ScanArray,
  ): Generator<void, ScanArray> {
    const b = this.bytes;
    let items: ScanNode[] = [];
    let pos = this.skipWs(start + 1);
    if (b[pos] === CLOSE_ARRAY) return { type: 'array', start, end: pos + 1, items, clean: true };
    // The leading items that end inside the shared bytes are the earlier scan's, all of them at once (the
    // per-item test below would take each of them over): a body that extends the earlier one pays for
    // its new items, not for every item of the conversation.
    const taken = prev ? this.leadingTaken(prev) : 0;
    const run = prev ? cleanRuns.get(prev) : undefined;
    // How many leading items have everything from `[` to their end clean (for the next scan's take-over).
    let cleanRun = 0;
    if (prev && taken > 0 && run !== undefined) {
      items = prev.items.slice(0, taken);
      const last = items[taken - 1] as ScanNode;
      // Everything from `[` to the last item taken is clean iff it was in the earlier scan.
      if (taken > run) this.clean = false;
      cleanRun = Math.min(taken, run);
      if (this.nextBackslash < last.end) {
        const nb = b.indexOf(BACKSLASH, last.end);
        this.nextBackslash = nb < 0 ? Number.POSITIVE_INFINITY : nb;
      }
      takenItems.set(items, { from: new WeakRef(prev.items), count: taken });
      pos = this.skipWs(last.end);
      const c = b[pos];
      if (c === CLOSE_ARRAY) return this.arrayNode(start, pos + 1, items, cleanRun);
      if (c !== COMMA) this.fail(pos, "expected ',' or ']' in an array");
      pos = this.skipWs(pos + 1);
    }
    let stepFrom = pos;
    for (;;) {
      const child = this.value(pos, itemShape, depth, prev?.items[items.length]);
      items.push(child);
      if (this.clean && cleanRun === items.length - 1) cleanRun = items.length;
      pos = this.skipWs(child.end);
      if (items.length % STEP_ITEMS === 0 || pos - stepFrom >= STEP_BYTES) {
        yield;
        stepFrom = pos;
      }
      const c = b[pos];
      if (c === COMMA) {
        pos = this.skipWs(pos + 1);
        continue;
      }
      if (c === CLOSE_ARRAY) return this.arrayNode(start, pos + 1, items, cleanRun);
      this.fail(pos, "expected ',' or ']' in an array");
    }
  }

  /** A root member's array node, with how many of its leading items were clean from its `[` on. */
  private arrayNode(start: number, end: number, items: ScanNode[], cleanRun: number): ScanArray {
    const node: ScanArray = { type: 'array', start, end, items, clean: true };
    cleanRuns.set(node, cleanRun);
    return node;
  }

  /**
   * How many leading items of `prev` (an earlier array at this very place) end inside the shared bytes:
   * the items the per-item take-over would take, found by bisection (items are in byte order).
   */
  private leadingTaken(prev: ScanArray): number {
    const items = prev.items;
    let lo = 0;
    let hi = items.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((items[mid] as ScanNode).end < this.sameBytes) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  object(
    start: number,
    memberShapes: Readonly<Record<string, ScanShape>>,
    depth: number,
    only?: readonly string[],
    prev?: ScanObject,
  ): ScanObject {
    const b = this.bytes;
    const members = new Map<string, ScanNode>();
    const wanted = only ? encodedKeys(only) : undefined;
    const wantedCount = wanted ? wanted.length : 0;
    let pos = this.skipWs(start + 1);
    if (b[pos] === CLOSE_OBJECT) return { type: 'object', start, end: pos + 1, members, clean: true };
    for (;;) {
      if (b[pos] !== QUOTE) this.fail(pos, 'expected a string key');
      const keyEnd = this.skipString(pos);
      let key: string | undefined;
      if (wanted && only) {
        const len = keyEnd - pos - 2;
        for (let k = 0; k < wantedCount; k++) {
          const raw = wanted[k] as Buffer;
          if (raw.length === len && bytesAt(b, pos + 1, raw)) {
            key = only[k];
            break;
          }
        }
      } else key = decodeKey(b, pos, keyEnd);
      if (isDigit(b[pos + 1])) this.clean = false;
      pos = this.skipWs(keyEnd);
      if (b[pos] !== COLON) this.fail(pos, "expected ':' after a key");
      pos = this.skipWs(pos + 1);
      if (key === undefined) {
        if (pos >= b.length) this.fail(pos, 'unexpected end of input');
        pos = this.skipWs(this.skipValue(pos, depth));
      } else {
        const child = this.value(
          pos,
          Object.hasOwn(memberShapes, key) ? memberShapes[key] : undefined,
          depth,
          prev?.members.get(key),
        );
        // A repeated key: JSON.parse keeps one, so these bytes are not what JSON.stringify would write.
        if (members.delete(key)) this.clean = false;
        members.set(key, child);
        pos = this.skipWs(child.end);
      }
      const c = b[pos];
      if (c === COMMA) {
        pos = this.skipWs(pos + 1);
        continue;
      }
      if (c === CLOSE_OBJECT) return { type: 'object', start, end: pos + 1, members, clean: true };
      this.fail(pos, "expected ',' or '}' in an object");
    }
  }

  array(start: number, itemShape: ScanShape, depth: number, prev?: ScanArray): ScanArray {
    const b = this.bytes;
    const items: ScanNode[] = [];
    let pos = this.skipWs(start + 1);
    if (b[pos] === CLOSE_ARRAY) return { type: 'array', start, end: pos + 1, items, clean: true };
    for (;;) {
      const child = this.value(pos, itemShape, depth, prev?.items[items.length]);
      items.push(child);
      pos = this.skipWs(child.end);
      const c = b[pos];
      if (c === COMMA) {
        pos = this.skipWs(pos + 1);
        continue;
      }
      if (c === CLOSE_ARRAY) return { type: 'array', start, end: pos + 1, items, clean: true };
      this.fail(pos, "expected ',' or ']' in an array");
    }
  }

  /** Returns the offset just past the closing quote of the string opening at `pos`; notes its escapes. */
  skipString(pos: number): number {
    const b = this.bytes;
    let from = pos + 1;
    for (;;) {
      const q = b.indexOf(QUOTE, from);
      if (q < 0) this.fail(pos, 'unterminated string');
      let escapedQuote = false;
      while (this.nextBackslash < q) {
        const at = this.nextBackslash;
        const e = b[at + 1];
        if (e === 0x75 || e === 0x2f) this.clean = false; // \u and \/ are written differently by JSON.stringify
        if (at + 1 === q) escapedQuote = true;
        const nb = b.indexOf(BACKSLASH, at + 2);
        this.nextBackslash = nb < 0 ? Number.POSITIVE_INFINITY : nb;
      }
      if (!escapedQuote) return q + 1;
      from = q + 1;
    }
  }

  /**
   * Skips one value of any kind (inside `depth` open containers), checking only that brackets balance and
   * that nesting stays within the limit; its contents are checked when parsed.
   */
  skipValue(pos: number, depth: number): number {
    const b = this.bytes;
    const c = b[pos] as number;
    if (c === QUOTE) return this.skipString(pos);
    if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
      const stack: number[] = [c];
      const room = this.maxDepth - depth;
      if (room <= 0) this.tooDeep(pos);
      let p = pos + 1;
      while (p < b.length) {
        const d = b[p] as number;
        if (d === QUOTE) {
          const end = this.skipString(p);
          // An integer-like key would be reordered by JSON.parse: not clean.
          if (b[end] === COLON && isDigit(b[p + 1])) this.clean = false;
          p = end;
          continue;
        }
        if (isWhitespace(d)) this.clean = false;
        else if (
          d !== COMMA &&
          d !== COLON &&
          d !== CLOSE_OBJECT &&
          d !== CLOSE_ARRAY &&
          d !== OPEN_OBJECT &&
          d !== OPEN_ARRAY
        ) {
          p = this.primitive(p);
          continue;
        }
        if (d === OPEN_OBJECT || d === OPEN_ARRAY) {
          if (stack.length >= room) this.tooDeep(p);
          stack.push(d);
        } else if (d === CLOSE_OBJECT || d === CLOSE_ARRAY) {
          const open = stack.pop();
          if ((d === CLOSE_OBJECT) !== (open === OPEN_OBJECT)) this.fail(p, 'mismatched bracket');
          if (stack.length === 0) return p + 1;
        }
        p++;
      }
      this.fail(b.length, 'unexpected end of input');
    }
    return this.primitive(pos);
  }

  /** A number or literal: runs until a delimiter. Only plain integers and exact literals are clean. */
  primitive(pos: number): number {
    const b = this.bytes;
    let p = pos;
    let plainInteger = true;
    while (p < b.length) {
      const d = b[p] as number;
      if (d === COMMA || d === CLOSE_OBJECT || d === CLOSE_ARRAY || isWhitespace(d)) break;
      if (d === QUOTE || d === OPEN_OBJECT || d === OPEN_ARRAY || d === COLON)
        this.fail(p, 'unexpected character');
      if (!isDigit(d) && !(d === 0x2d && p === pos)) plainInteger = false;
      p++;
    }
    if (p === pos) this.fail(pos, 'expected a value');
    const len = p - pos;
    if (plainInteger) {
      const digits = b[pos] === 0x2d ? pos + 1 : pos;
      // Too long for a double, "-", "-0", or a leading zero: let JSON.parse judge and render it.
      if (len > 15 || p === digits || (b[digits] === 0x30 && (p - digits > 1 || digits > pos)))
        this.clean = false;
    } else if (!isLiteral(b, pos, len)) this.clean = false;
    return p;
  }
}

const keyCache = new WeakMap<readonly string[], Buffer[]>();

/** The UTF-8 bytes of each key in `only`, same order; computed once per list. */
function encodedKeys(only: readonly string[]): Buffer[] {
  let keys = keyCache.get(only);
  if (!keys) {
    keys = only.map((k) => Buffer.from(k));
    keyCache.set(only, keys);
  }
  return keys;
}

function bytesAt(b: Uint8Array, at: number, raw: Uint8Array): boolean {
  for (let i = 0; i < raw.length; i++) if (b[at + i] !== raw[i]) return false;
  return true;
}

function isDigit(c: number | undefined): boolean {
  return c !== undefined && c >= 0x30 && c <= 0x39;
}

const LITERALS = ['true', 'false', 'null'].map((w) => new TextEncoder().encode(w));

function isLiteral(b: Uint8Array, pos: number, len: number): boolean {
  return LITERALS.some((w) => w.length === len && w.every((c, i) => b[pos + i] === c));
}

/** Interned keys by a small hash of their bytes: object keys repeat endlessly, decoding them once is enough. */
const internedKeys = new Map<number, { bytes: Buffer; text: string }>();

/** Decodes a short, often repeated JSON string (a key, a role, a type) whose quotes are at `start`, `end - 1`. */
export function decodeKey(b: Uint8Array, start: number, end: number): string {
  const len = end - start - 2;
  if (len > 32) return decodeStringAt(b, start, end);
  let h = len;
  for (let i = start + 1; i < end - 1; i++) h = (Math.imul(h, 31) + (b[i] as number)) | 0;
  const hit = internedKeys.get(h);
  if (hit && hit.bytes.length === len && bytesAt(b, start + 1, hit.bytes)) return hit.text;
  const text = decodeStringAt(b, start, end);
  if (internedKeys.size < 4096)
    internedKeys.set(h, { bytes: Buffer.from(b.subarray(start + 1, end - 1)), text });
  return text;
}

/**
 * Decodes the JSON string whose quotes are at `start` and `end - 1`. Short plain ASCII strings (keys,
 * roles, types) are built directly; anything else goes through JSON.parse.
 */
export function decodeStringAt(b: Uint8Array, start: number, end: number): string {
  if (end - start <= 66) {
    let out = '';
    for (let i = start + 1; i < end - 1; i++) {
      const c = b[i] as number;
      if (c === BACKSLASH || c >= 0x80 || c < 0x20) return parseSpan(b, start, end) as string;
      out += String.fromCharCode(c);
    }
    return out;
  }
  return parseSpan(b, start, end) as string;
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
