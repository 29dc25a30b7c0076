// Turns one raw prompt unit into what the cache sees of it: identity hash, kind, name, tokens, markers.
// Memoized by the unit's raw bytes so that a request extending an earlier one only pays for its new units.

import { createHash, hash } from 'node:crypto';
import { parseSpan } from '../wire/json-scan.js';
import type { RawUnit, WireFormat } from '../wire/request-body.js';
import { defaultTokenEstimator, type TokenEstimator } from './token-estimate.js';

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
  /** A server tool's versioned type, e.g. `web_search_20250305`. */
  serverTool?: string;
}

/** Options for a {@link UnitReader}. */
export interface UnitReaderOptions {
  estimateTokens?: TokenEstimator;
  /** How many distinct units to remember (least recently used go first). Default 100,000. */
  memoEntries?: number;
}

const MARKER_KEYS = ['cache_control', 'prompt_cache_breakpoint'];

/** Reads units into {@link UnitInfo}s, remembering each distinct raw unit. One per estimator. */
export class UnitReader {
  private readonly memo = new Map<string, UnitInfo>();
  private readonly estimate: TokenEstimator;
  private readonly limit: number;
  /** How many units were computed and how many came from memory, for benchmarks and tests. */
  readonly stats = { computed: 0, remembered: 0 };

  constructor(options: UnitReaderOptions = {}) {
    this.estimate = options.estimateTokens ?? defaultTokenEstimator;
    this.limit = options.memoEntries ?? 100_000;
  }

  read(bytes: Uint8Array, unit: RawUnit, format: WireFormat): UnitInfo {
    if (unit.form === 'empty') return EMPTY;
    const raw = bytes.subarray(unit.span.start, unit.span.end);
    const key = `${format}|${unit.form}|${hash('sha1', raw, 'base64')}`;
    const known = this.memo.get(key);
    if (known) {
      this.memo.delete(key);
      this.memo.set(key, known);
      this.stats.remembered++;
      return known;
    }
    const info = this.compute(bytes, unit, format);
    this.memo.set(key, info);
    if (this.memo.size > this.limit) {
      const oldest = this.memo.keys().next().value;
      if (oldest !== undefined) this.memo.delete(oldest);
    }
    this.stats.computed++;
    return info;
  }

  private compute(bytes: Uint8Array, unit: RawUnit, format: WireFormat): UnitInfo {
    const value = parseSpan(bytes, unit.span.start, unit.span.end);
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
    let cacheControl: CacheMarker | undefined;
    let stripped = block;
    for (const k of MARKER_KEYS) {
      if (Object.hasOwn(stripped, k)) {
        const marker = stripped[k];
        if (marker && typeof marker === 'object') cacheControl = marker as CacheMarker;
        const { [k]: _drop, ...rest } = stripped;
        stripped = rest;
      }
    }
    const canonical = JSON.stringify(stripped);
    const kind = kindOf(unit, block);
    const name = nameOf(unit, block);
    const info: UnitInfo = {
      contentHash: hash('sha256', canonical, 'hex'),
      kind,
      tokens: this.estimate({ kind, level: unit.level, canonical }),
      hasImage:
        kind === 'image' ||
        kind === 'image_url' ||
        kind === 'input_image' ||
        canonical.includes('"type":"image"'),
      citations: canonical.includes('"citations":{"enabled":true'),
      deferLoading: unit.form === 'tool' && block.defer_loading === true,
    };
    if (name !== undefined) info.name = name;
    if (cacheControl) info.cacheControl = cacheControl;
    if (
      unit.form === 'tool' &&
      typeof block.type === 'string' &&
      !['custom', 'function'].includes(block.type)
    ) {
      if (!('input_schema' in block)) info.serverTool = block.type;
    }
    return info;
  }
}

const EMPTY: UnitInfo = {
  contentHash: createHash('sha256').update('empty').digest('hex'),
  kind: 'empty',
  tokens: 0,
  hasImage: false,
  citations: false,
  deferLoading: false,
};

function kindOf(unit: RawUnit, block: Record<string, unknown>): string {
  if (unit.form === 'tool') return 'tool';
  if (unit.form === 'tool_call') return 'tool_call';
  return typeof block.type === 'string' ? block.type : unit.form === 'item' ? 'item' : 'text';
}

function nameOf(unit: RawUnit, block: Record<string, unknown>): string | undefined {
  const fn = block.function as Record<string, unknown> | undefined;
  if (
    unit.form === 'tool' ||
    unit.form === 'tool_call' ||
    unit.form === 'item' ||
    block.type === 'tool_use'
  ) {
    if (typeof block.name === 'string') return block.name;
    if (fn && typeof fn.name === 'string') return fn.name;
    if (unit.form === 'tool' && typeof block.type === 'string') return block.type;
  }
  return undefined;
}
