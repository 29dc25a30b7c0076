// Turns one raw prompt unit into what the cache sees of it: identity hash, kind, name, tokens, markers.
// Memoized by identity, so a request extending an earlier one only pays for its new units; never mutates input.

import { hash } from 'node:crypto';
import { decodeKey, parseSpan, type ScanNode, type ScanObject } from '../wire/json-scan.js';
import type { RawUnit, WireFormat } from '../wire/request-body.js';
import { defaultTokenEstimator, FLAT_KINDS, type TokenEstimator } from './token-estimate.js';

/** A `cache_control` marker as sent (Anthropic), or an explicit OpenAI `prompt_cache_breakpoint`. */
export interface CacheMarker {
  type: string;
  ttl?: string;
}

/** What the cache sees of one unit. `contentHash` is the block identity (SPEC-caching.md, "Block identity"). */
export interface UnitInfo {
  contentHash: string;
  kind: string;
  name?: string;
  tokens: number;
  cacheControl?: CacheMarker;
  /** The unit holds an image somewhere (images are a messages-level parameter on Anthropic). */
  hasImage: boolean;
  /** A document block with citations enabled. */
  citations: boolean;
  /** A tool definition with `defer_loading: true` (left out of the hashed tool list). */
  deferLoading: boolean;
  /** A text block with empty text (it cannot carry a cache marker). */
  emptyText: boolean;
  /** A server tool's versioned type, e.g. `web_search_20250305`. */
  serverTool?: string;
  /** Tool definitions: short identities of their parts, so a change can be named without the body. */
  toolParts?: ToolParts;
}

/** A tool definition's parts, each a 16-hex identity: its schema, its description, everything else. */
export interface ToolParts {
  schema: string;
  description: string;
  other: string;
}

/** Options for a {@link UnitReader}. */
export interface UnitReaderOptions {
  estimateTokens?: TokenEstimator;
  /**
   * How many distinct units to remember (oldest go first). Default 50,000: about 200 bytes each, 10 MB in
   * all. The memo only saves a unit's token estimate and flags (its identity is hashed every time), so a
   * larger one buys little and holds memory a long-running proxy never gives back.
   */
  memoEntries?: number;
}

/** The memo's default bound (see {@link UnitReaderOptions.memoEntries}). */
export const DEFAULT_MEMO_ENTRIES = 50_000;

const MARKER_KEYS = ['cache_control', 'prompt_cache_breakpoint'] as const;
const IMAGE_NEEDLE = Buffer.from('"type":"image"');
const CITATIONS_NEEDLE = Buffer.from('"citations":{"enabled":true');
const COMMA = 0x2c;
const EMPTY_TEXT = Buffer.from('{"type":"text","text":""}');

type Info = Omit<UnitInfo, 'cacheControl'>;

/**
 * Reads units into {@link UnitInfo}s. Identity is the sha256 of the unit's canonical JSON: for bytes the
 * scanner found canonical (compact, as `JSON.stringify` writes them) that is the raw bytes minus the cache
 * marker, hashed without a parse; otherwise the unit is parsed and re-serialized. Both give the same hash.
 */
export class UnitReader {
  /** One memo per unit form (the same JSON read as a tool or as content differs in kind). Oldest out first. */
  private readonly memo = new Map<string, Map<string, Info>>();
  private size = 0;
  private readonly estimate: TokenEstimator;
  private readonly limit: number;
  /**
   * For benchmarks and tests: units computed from scratch, found in memory by identity, and reused from
   * the previous body by a byte compare (counted by the PrefixBuilder), and units evicted from memory.
   * `compared`: units the PrefixBuilder looked at one by one against the kept bodies (not in a run taken
   * over from the body the scan took its nodes from): what a body costs beyond its new units.
   */
  readonly stats = { computed: 0, remembered: 0, reused: 0, evicted: 0, compared: 0 };

  constructor(options: UnitReaderOptions = {}) {
    this.estimate = options.estimateTokens ?? defaultTokenEstimator;
    this.limit = options.memoEntries ?? DEFAULT_MEMO_ENTRIES;
  }

  read(bytes: Buffer, unit: RawUnit, format: WireFormat): UnitInfo {
    if (unit.form === 'empty') return EMPTY;
    const node = unit.node;
    const canonical = node.clean ? canonicalBytes(bytes, unit, format) : undefined;
    let marker: CacheMarker | undefined;
    let canonicalText: string | undefined;
    let parsedValue: unknown;
    let canonicalBuf: Buffer;
    if (canonical) {
      canonicalBuf = canonical;
      if (node.type === 'object') marker = markerOf(bytes, node);
    } else {
      parsedValue = parseSpan(bytes, unit.span.start, unit.span.end);
      const parsed = canonicalize(parsedValue, unit, format);
      marker = parsed.marker;
      canonicalText = parsed.canonical;
      canonicalBuf = Buffer.from(canonicalText);
    }
    const contentHash = hash('sha256', canonicalBuf, 'hex');
    let memo = this.memo.get(unit.form);
    if (!memo) {
      memo = new Map();
      this.memo.set(unit.form, memo);
    }
    let info = memo.get(contentHash);
    if (info) this.stats.remembered++;
    else {
      if (canonical && hasControlCharacter(canonical)) {
        // Raw control characters inside a string: invalid JSON. Let the parser say exactly where.
        parseSpan(bytes, unit.span.start, unit.span.end);
      }
      info = this.compute(bytes, canonicalBuf, canonicalText, parsedValue, contentHash, unit, format);
      this.stats.computed++;
      if (this.size >= this.limit) this.evictOldest();
      memo.set(contentHash, info);
      this.size++;
    }
    return marker ? { ...info, cacheControl: marker } : info;
  }

  /** How many units are remembered now, and the bound. */
  memoSize(): { size: number; limit: number } {
    return { size: this.size, limit: this.limit };
  }

  /**
   * Full: drops the oldest tenth of the bound at once, from the largest form's memo first (insertion
   * order). One entry at a time would walk every slot deleted before it at the head of the Map (V8 keeps
   * them until a rehash): O(bound) per new unit. A batch makes eviction amortized O(1).
   */
  private evictOldest(): void {
    let todo = Math.max(1, Math.ceil(this.limit / 10));
    while (todo > 0 && this.size > 0) {
      let largest: Map<string, Info> | undefined;
      for (const m of this.memo.values()) if (!largest || m.size > largest.size) largest = m;
      if (!largest || largest.size === 0) return;
      for (const key of largest.keys()) {
        largest.delete(key);
        this.size--;
        this.stats.evicted++;
        if (--todo === 0) break;
      }
    }
  }

  private compute(
    bytes: Buffer,
    buf: Buffer,
    text: string | undefined,
    parsed: unknown,
    contentHash: string,
    unit: RawUnit,
    format: WireFormat,
  ): Info {
    const block = blockFields(bytes, parsed, unit, format);
    const kind = kindOf(unit, block.type);
    // A flat block nests no other blocks: no image, base64 payload or citations can hide inside it.
    const flat = FLAT_KINDS.has(kind) || (kind === 'tool_result' && block.stringContent);
    const tokens = this.estimate({
      kind,
      level: unit.level,
      bytes: buf,
      flat,
      text: () => text ?? buf.toString('utf8'),
    });
    const info: Info = {
      contentHash,
      kind,
      name: undefined,
      tokens,
      hasImage:
        kind === 'image' ||
        kind === 'image_url' ||
        kind === 'input_image' ||
        (!flat && buf.indexOf(IMAGE_NEEDLE) >= 0),
      citations: !flat && buf.indexOf(CITATIONS_NEEDLE) >= 0,
      deferLoading: unit.form === 'tool' && block.defer_loading === true,
      emptyText: buf.length === EMPTY_TEXT.length && buf.equals(EMPTY_TEXT),
      serverTool: undefined,
    };
    const name = nameOf(unit, block);
    if (name !== undefined) info.name = name;
    if (unit.form === 'tool') info.toolParts = toolParts(parsed ?? JSON.parse(text ?? buf.toString('utf8')));
    if (
      unit.form === 'tool' &&
      typeof block.type === 'string' &&
      !['custom', 'function'].includes(block.type)
    ) {
      if (!block.hasInputSchema) info.serverTool = block.type;
    }
    return info;
  }
}

const SCHEMA_KEYS = ['input_schema', 'parameters'];
const part = (v: unknown) => hash('sha256', JSON.stringify(v ?? null), 'hex').slice(0, 16);

/** The parts of a tool definition (OpenAI Chat nests it under `function`: both shapes read the same). */
function toolParts(value: unknown): ToolParts {
  const t = (value && typeof value === 'object' ? value : {}) as Record<string, unknown>;
  const fn = t.function;
  const { cache_control: _c, ...rest } = t;
  const flat: Record<string, unknown> =
    fn && typeof fn === 'object' ? { ...rest, ...(fn as Record<string, unknown>) } : rest;
  const other: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(flat))
    if (k !== 'description' && k !== 'function' && !SCHEMA_KEYS.includes(k)) other[k] = v;
  return {
    schema: part(SCHEMA_KEYS.map((k) => flat[k])),
    description: part(flat.description),
    other: part(other),
  };
}

const EMPTY: UnitInfo = {
  contentHash: hash('sha256', 'empty', 'hex'),
  kind: 'empty',
  tokens: 0,
  hasImage: false,
  citations: false,
  deferLoading: false,
  emptyText: false,
};

/** The few fields of a block that kind, name and flags need. */
interface BlockFields {
  type?: unknown;
  name?: unknown;
  functionName?: unknown;
  defer_loading?: unknown;
  hasInputSchema: boolean;
  /** The block's `content` is a plain string (a tool_result with text only). */
  stringContent: boolean;
}

function blockFields(bytes: Buffer, parsed: unknown, unit: RawUnit, format: WireFormat): BlockFields {
  const node = unit.node;
  if (node.type !== 'object') {
    // A string unit: system text, or string content.
    const type = format === 'openai-responses' && unit.level === 'messages' ? 'input_text' : 'text';
    return { type, hasInputSchema: false, stringContent: false };
  }
  if (parsed !== undefined) {
    const v = parsed as Record<string, unknown>;
    const fn = v.function;
    return {
      type: v.type,
      name: v.name,
      functionName: fn && typeof fn === 'object' ? (fn as Record<string, unknown>).name : undefined,
      defer_loading: v.defer_loading,
      hasInputSchema: 'input_schema' in v,
      stringContent: typeof v.content === 'string',
    };
  }
  // Read only the small members that matter, never the whole block.
  const read = (key: string): unknown => {
    const m = node.members.get(key);
    if (!m) return undefined;
    if (m.type === 'leaf' && m.first === 0x22) return decodeKey(bytes, m.start, m.end);
    return m.end - m.start <= 8 || key !== 'function' ? parseSpan(bytes, m.start, m.end) : undefined;
  };
  const fnNode = node.members.get('function');
  let functionName: unknown;
  if (fnNode && fnNode.type === 'leaf' && fnNode.first === 0x7b) {
    const fn = parseSpan(bytes, fnNode.start, fnNode.end) as Record<string, unknown>;
    functionName = fn.name;
  }
  return {
    type: read('type'),
    name: node.members.has('name') ? read('name') : undefined,
    functionName,
    defer_loading: node.members.has('defer_loading') ? read('defer_loading') : undefined,
    hasInputSchema: node.members.has('input_schema'),
    stringContent:
      node.members.get('content')?.type === 'leaf' &&
      (node.members.get('content') as { first: number }).first === 0x22,
  };
}

/**
 * The canonical bytes of a clean unit without a parse: the raw bytes minus a marker member, or a string
 * wrapped as the text block it stands for. Undefined when a marker cannot be cut out byte-exactly.
 */
function canonicalBytes(bytes: Buffer, unit: RawUnit, format: WireFormat): Buffer | undefined {
  const node = unit.node;
  if (node.type === 'leaf') {
    if (node.first !== 0x22) return undefined;
    const type = format === 'openai-responses' && unit.level === 'messages' ? 'input_text' : 'text';
    return Buffer.concat([
      Buffer.from(`{"type":"${type}","text":`),
      bytes.subarray(node.start, node.end),
      CLOSE,
    ]);
  }
  if (node.type !== 'object') return undefined;
  let out = bytes.subarray(node.start, node.end);
  for (const key of MARKER_KEYS) {
    const value = node.members.get(key);
    if (!value) continue;
    const cut = memberSpan(bytes, node, key, value);
    if (!cut) return undefined;
    const rel = { start: cut.start - node.start, end: cut.end - node.start };
    out = Buffer.concat([out.subarray(0, rel.start), out.subarray(rel.end)]);
    // A second marker key would need offsets re-based; both at once never happens on the wire.
    if (node.members.has(MARKER_KEYS[1]) && key === MARKER_KEYS[0]) return undefined;
  }
  return out;
}

const CLOSE = Buffer.from('}');

/** The bytes of `"key":value` plus one adjacent comma, in a compact object. */
function memberSpan(
  bytes: Buffer,
  obj: ScanObject,
  key: string,
  value: ScanNode,
): { start: number; end: number } | undefined {
  const keyBytes = `"${key}":`;
  const keyStart = value.start - keyBytes.length;
  if (keyStart <= obj.start || bytes.toString('latin1', keyStart, value.start) !== keyBytes) return undefined;
  if (bytes[keyStart - 1] === COMMA) return { start: keyStart - 1, end: value.end };
  if (bytes[value.end] === COMMA) return { start: keyStart, end: value.end + 1 };
  return { start: keyStart, end: value.end };
}

function markerOf(bytes: Buffer, node: ScanObject): CacheMarker | undefined {
  for (const key of MARKER_KEYS) {
    const value = node.members.get(key);
    if (value) {
      const v = parseSpan(bytes, value.start, value.end);
      if (v && typeof v === 'object') return v as CacheMarker;
    }
  }
  return undefined;
}

/** The slow path: a parsed unit as canonical JSON text, without its marker. */
function canonicalize(
  value: unknown,
  unit: RawUnit,
  format: WireFormat,
): { canonical: string; marker?: CacheMarker } {
  let block: Record<string, unknown>;
  if (typeof value === 'string') {
    block = {
      type: format === 'openai-responses' && unit.level === 'messages' ? 'input_text' : 'text',
      text: value,
    };
  } else if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
    block = value as Record<string, unknown>;
  } else {
    block = { value };
  }
  let marker: CacheMarker | undefined;
  for (const k of MARKER_KEYS) {
    if (Object.hasOwn(block, k)) {
      const m = block[k];
      if (m && typeof m === 'object') marker = m as CacheMarker;
      const { [k]: _drop, ...rest } = block;
      block = rest;
    }
  }
  return marker ? { canonical: JSON.stringify(block), marker } : { canonical: JSON.stringify(block) };
}

/** Whether any byte is below 0x20, sixteen bytes per step (in compact JSON every such byte is an error). */
function hasControlCharacter(buf: Buffer): boolean {
  const start = buf.byteOffset;
  const end = start + buf.length;
  const alignedStart = Math.min(end, (start + 3) & ~3);
  const alignedEnd = Math.max(alignedStart, end & ~3);
  for (let i = 0; i < alignedStart - start; i++) if ((buf[i] as number) < 0x20) return true;
  const words = new Int32Array(buf.buffer, alignedStart, (alignedEnd - alignedStart) >>> 2);
  const n = words.length;
  const K = 0x20202020;
  let i = 0;
  // (w - 0x20..) & ~w sets a byte's high bit where that byte is below 0x20 (the classic "hasless" test).
  for (; i + 4 <= n; i += 4) {
    const a = words[i] as number;
    const b = words[i + 1] as number;
    const c = words[i + 2] as number;
    const d = words[i + 3] as number;
    if (((((a - K) & ~a) | ((b - K) & ~b) | ((c - K) & ~c) | ((d - K) & ~d)) & 0x80808080) !== 0) return true;
  }
  for (; i < n; i++) {
    const w = words[i] as number;
    if (((w - K) & ~w & 0x80808080) !== 0) return true;
  }
  for (let j = alignedEnd - start; j < buf.length; j++) if ((buf[j] as number) < 0x20) return true;
  return false;
}

function kindOf(unit: RawUnit, type: unknown): string {
  if (unit.form === 'tool') return 'tool';
  if (unit.form === 'tool_call') return 'tool_call';
  return typeof type === 'string' ? type : unit.form === 'item' ? 'item' : 'text';
}

function nameOf(unit: RawUnit, block: BlockFields): string | undefined {
  if (
    unit.form === 'tool' ||
    unit.form === 'tool_call' ||
    unit.form === 'item' ||
    block.type === 'tool_use'
  ) {
    if (typeof block.name === 'string') return block.name;
    if (typeof block.functionName === 'string') return block.functionName;
    if (unit.form === 'tool' && typeof block.type === 'string') return block.type;
  }
  return undefined;
}
