// Finds where two requests' cached prefixes stop agreeing and says what changed there, structurally.
// Pure; it compares the prefix model only, so it agrees with everything else built on that model.

import { LEVELS, type Prefix, type PrefixBlock, type PrefixLevel, paramField } from './build-prefix.js';
import { stableJson } from './stable-json.js';

/** A parameter that differs, with its value in each request (undefined when absent). */
export interface ParamChange {
  name: string;
  before: unknown;
  after: unknown;
}

/** What changed among the tools, by name. `index` is the tool's position in the request that has it. */
export interface ToolsChange {
  type: 'tools';
  /** Added tools; `before` names the tool it was inserted in front of (absent when appended at the end). */
  added: Array<{ name: string; index: number; before?: string }>;
  removed: Array<{ name: string; index: number }>;
  /** The first place the shared tools' order differs: `moved` now stands where `displaced` stood. */
  reordered: Array<{ index: number; moved: string; displaced: string }>;
  schemaChanged: string[];
  descriptionChanged: string[];
  /** Other fields of the definition changed (type, strict, …). */
  otherChanged: string[];
}

export interface ParamsChange {
  type: 'params';
  /** The level the change invalidates (and every level after it). */
  invalidates: PrefixLevel;
  params: ParamChange[];
}

/**
 * An edit in the system or messages level. `edited`: the block's content changed; `inserted` / `removed`:
 * blocks appeared or vanished before otherwise unchanged content; `restructured`: the same content now
 * sits in a different message shape (moved into its own message, merged into a neighbour, role changed).
 */
export interface BlocksChange {
  type: 'system' | 'messages';
  edit: 'edited' | 'inserted' | 'removed' | 'restructured';
  /**
   * Position within the level: the system block's index (`partIndex`; for a system prompt sent as leading
   * system/developer messages, its block's index among them, with their `messageIndex` and `role`), or the
   * message and its block for messages.
   */
  messageIndex?: number;
  partIndex?: number;
  role?: string;
  kind: string;
  /** For inserted / removed: how many blocks. */
  count?: number;
}

export type PrefixChange = ToolsChange | ParamsChange | BlocksChange;

/** The first divergence between two prefixes. */
export interface Divergence {
  /** `params` when a folded parameter changed, else the level of the first differing block. */
  level: 'params' | PrefixLevel;
  /** Index (in the prefix's block list) of the first block whose cache key differs. */
  blockIndex: number;
  change: PrefixChange;
  /** Byte offset of the divergence in each body (the block, or the parameter's field); null if absent there. */
  byteOffset: { a: number | null; b: number | null };
  /** Estimated tokens before the divergence (cacheable by both) and after it in `b` (to be re-written). */
  sharedTokens: number;
  lostTokens: number;
  /**
   * Every part that differs, in prefix order (`params` when any folded parameter differs; `tools` and
   * `system` when their blocks differ; `messages` when b does not extend a's history). The first is `level`.
   */
  changed: Array<'params' | PrefixLevel>;
}

/** The result of comparing two prefixes: `divergence` is null when one is a prefix of the other. */
export interface PrefixComparison {
  divergence: Divergence | null;
  sharedTokens: number;
  a: { format: string; model: string | undefined; blocks: number; tokens: number };
  b: { format: string; model: string | undefined; blocks: number; tokens: number };
}

/**
 * Where `b` (usually the later request) stops sharing `a`'s cached prefix. Moved cache markers, JSON
 * whitespace and string-vs-single-text-block content are not divergences: identities ignore them.
 */
export function firstDivergence(a: Prefix, b: Prefix): Divergence | null {
  const d = divergenceAt(a, b);
  if (d) d.changed = changedParts(a, b, d);
  return d;
}

function divergenceAt(a: Prefix, b: Prefix): Divergence | null {
  for (const level of LEVELS) {
    const la = a.levels[level];
    const lb = b.levels[level];
    // Every step before this fold agreed (else we returned), so a differing fold is a parameter change.
    if (la.foldHash !== lb.foldHash) return paramsDivergence(a, b, level);
    const n = Math.min(la.end - la.start, lb.end - lb.start);
    for (let i = 0; i < n; i++) {
      const ba = a.blocks[la.start + i] as PrefixBlock;
      const bb = b.blocks[lb.start + i] as PrefixBlock;
      if (ba !== bb && ba.hash !== bb.hash) return blocksDivergence(a, b, level, la.start + i, lb.start + i);
    }
    // Messages may simply grow (or be cut short): that is not a divergence. Tools and system may not.
    if (level !== 'messages' && la.end - la.start !== lb.end - lb.start) {
      return blocksDivergence(a, b, level, la.start + n, lb.start + n);
    }
  }
  return null;
}

function sameBlocks(a: Prefix, b: Prefix, level: PrefixLevel): boolean {
  const la = a.levels[level];
  const lb = b.levels[level];
  if (la.end - la.start !== lb.end - lb.start) return false;
  for (let i = 0; i < la.end - la.start; i++)
    if (a.blocks[la.start + i]?.contentHash !== b.blocks[lb.start + i]?.contentHash) return false;
  return true;
}

/** Every part of the prefix that differs, the divergence's own level first. */
function changedParts(a: Prefix, b: Prefix, d: Divergence): Array<'params' | PrefixLevel> {
  const out: Array<'params' | PrefixLevel> = [d.level];
  const add = (p: 'params' | PrefixLevel) => {
    if (!out.includes(p)) out.push(p);
  };
  if (LEVELS.some((l) => stableJson(a.levels[l].params) !== stableJson(b.levels[l].params))) add('params');
  if (!sameBlocks(a, b, 'tools')) add('tools');
  if (!sameBlocks(a, b, 'system')) add('system');
  // Messages changed unless b's history starts with all of a's (or the reverse): transcripts say so.
  const la = a.levels.messages;
  const lb = b.levels.messages;
  const n = Math.min(la.end - la.start, lb.end - lb.start);
  if (n > 0) {
    const ta = a.blocks[la.start + n - 1]?.transcript ?? a.blocks[la.start + n - 1]?.contentHash;
    const tb = b.blocks[lb.start + n - 1]?.transcript ?? b.blocks[lb.start + n - 1]?.contentHash;
    if (ta !== tb) add('messages');
  }
  return out;
}

/** Compares two prefixes and returns the divergence with the sizes around it. */
export function comparePrefixes(a: Prefix, b: Prefix): PrefixComparison {
  const divergence = firstDivergence(a, b);
  const shared = divergence ? divergence.sharedTokens : Math.min(a.totalTokens, b.totalTokens);
  return {
    divergence,
    sharedTokens: shared,
    a: { format: a.format, model: a.model, blocks: a.blocks.length, tokens: a.totalTokens },
    b: { format: b.format, model: b.model, blocks: b.blocks.length, tokens: b.totalTokens },
  };
}

function tokensBefore(p: Prefix, index: number): number {
  return index > 0 ? (p.blocks[index - 1] as PrefixBlock).cumulativeTokens : 0;
}

function paramsDivergence(a: Prefix, b: Prefix, level: PrefixLevel): Divergence {
  const names = new Set([...Object.keys(a.levels[level].params), ...Object.keys(b.levels[level].params)]);
  const params: ParamChange[] = [];
  for (const name of names) {
    const before = a.levels[level].params[name];
    const after = b.levels[level].params[name];
    if (stableJson(before) !== stableJson(after)) params.push({ name, before, after });
  }
  const first = params[0]?.name;
  const offset = (p: Prefix): number | null => {
    const field = first ? paramField(p.format, first) : undefined;
    const span = field ? p.body.fieldSpans.get(field) : undefined;
    if (span) return span.start;
    const block = p.blocks[p.levels[level].start];
    return block ? block.span.start : null;
  };
  const shared = tokensBefore(b, b.levels[level].start);
  return {
    level: 'params',
    blockIndex: b.levels[level].start,
    change: { type: 'params', invalidates: level, params },
    byteOffset: { a: offset(a), b: offset(b) },
    sharedTokens: shared,
    lostTokens: b.totalTokens - shared,
    changed: [],
  };
}

/**
 * A messages-level block of the leading system/developer messages (OpenAI Chat's and Responses' way of
 * sending the system prompt): it has no transcript key, the conversation starts after it.
 */
function inLeadingPrompt(p: Prefix, i: number): boolean {
  const blk = p.blocks[i];
  return blk !== undefined && blk.level === 'messages' && blk.transcript === undefined;
}

function blocksDivergence(a: Prefix, b: Prefix, level: PrefixLevel, ia: number, ib: number): Divergence {
  const change = level === 'tools' ? toolsChange(a, b) : blocksChange(a, b, level, ia, ib);
  const shared = tokensBefore(b, ib);
  // The leading system/developer messages are the system prompt: reported at the system level (the cache
  // key is the same; only the name and the level said differ).
  const prompt = level === 'messages' && (inLeadingPrompt(b, ib) || inLeadingPrompt(a, ia));
  if (prompt && change.type === 'messages') {
    change.type = 'system';
    change.partIndex = ib - b.levels.messages.start;
  }
  return {
    level: prompt ? 'system' : level,
    blockIndex: ib,
    change,
    byteOffset: { a: a.blocks[ia]?.span.start ?? null, b: b.blocks[ib]?.span.start ?? null },
    sharedTokens: shared,
    lostTokens: b.totalTokens - shared,
    changed: [],
  };
}

interface ToolView {
  name: string;
  /** The name, and which occurrence of it (a list may name a tool twice; the provider refuses that). */
  key: string;
  index: number;
  contentHash: string;
  parts: PrefixBlock['toolParts'];
}

/** The tools as the prefix model holds them: names and part identities, no body needed (captures too). */
function toolViews(p: Prefix): ToolView[] {
  const { start, end } = p.levels.tools;
  const seen = new Map<string, number>();
  return p.blocks.slice(start, end).map((blk, index) => {
    const name = blk.name ?? `#${index}`;
    const n = seen.get(name) ?? 0;
    seen.set(name, n + 1);
    return {
      name,
      key: n ? `${name}\u0000${n}` : name,
      index,
      contentHash: blk.contentHash,
      parts: blk.toolParts,
    };
  });
}

function toolsChange(a: Prefix, b: Prefix): ToolsChange {
  const ta = toolViews(a);
  const tb = toolViews(b);
  const inA = new Map(ta.map((t) => [t.key, t]));
  const inB = new Map(tb.map((t) => [t.key, t]));
  const change: ToolsChange = {
    type: 'tools',
    added: tb
      .filter((t) => !inA.has(t.key))
      .map(({ name, index }) => {
        const next = tb.slice(index + 1).find((t) => inA.has(t.key));
        return next ? { name, index, before: next.name } : { name, index };
      }),
    removed: ta.filter((t) => !inB.has(t.key)).map(({ name, index }) => ({ name, index })),
    reordered: [],
    schemaChanged: [],
    descriptionChanged: [],
    otherChanged: [],
  };
  const sharedA = ta.filter((t) => inB.has(t.key));
  const sharedB = tb.filter((t) => inA.has(t.key));
  for (let i = 0; i < sharedB.length; i++) {
    const x = sharedA[i] as ToolView;
    const y = sharedB[i] as ToolView;
    if (x.key !== y.key) {
      change.reordered.push({ index: y.index, moved: y.name, displaced: x.name });
      break;
    }
  }
  for (const y of sharedB) {
    const x = inA.get(y.key) as ToolView;
    if (x.contentHash === y.contentHash) continue;
    let described = false;
    if (x.parts && y.parts && x.parts.schema !== y.parts.schema) {
      change.schemaChanged.push(y.name);
      described = true;
    }
    if (x.parts && y.parts && x.parts.description !== y.parts.description) {
      change.descriptionChanged.push(y.name);
      described = true;
    }
    if (!described) change.otherChanged.push(y.name);
  }
  return change;
}

const LOOKAHEAD = 64;

function blocksChange(a: Prefix, b: Prefix, level: PrefixLevel, ia: number, ib: number): BlocksChange {
  const A = a.blocks;
  const B = b.blocks;
  const endA = a.levels[level].end;
  const endB = b.levels[level].end;
  const x = A[ia];
  const y = B[ib];
  const type = level === 'system' ? 'system' : 'messages';
  const where = (blk: PrefixBlock) => {
    const out: Pick<BlocksChange, 'messageIndex' | 'partIndex' | 'role' | 'kind'> = { kind: blk.kind };
    if (blk.messageIndex !== undefined) out.messageIndex = blk.messageIndex;
    if (blk.partIndex !== undefined) out.partIndex = blk.partIndex;
    if (blk.role !== undefined) out.role = blk.role;
    return out;
  };
  if (!y) return { type, edit: 'removed', count: endA - ia, ...where(x as PrefixBlock) };
  if (!x) return { type, edit: 'inserted', count: endB - ib, ...where(y) };
  if (x.contentHash === y.contentHash) return { type, edit: 'restructured', ...where(y) };
  for (let k = 1; k <= LOOKAHEAD && ib + k < endB; k++) {
    if ((B[ib + k] as PrefixBlock).contentHash === x.contentHash)
      return { type, edit: 'inserted', count: k, ...where(y) };
  }
  for (let k = 1; k <= LOOKAHEAD && ia + k < endA; k++) {
    if ((A[ia + k] as PrefixBlock).contentHash === y.contentHash) {
      return { type, edit: 'removed', count: k, ...where(x) };
    }
  }
  return { type, edit: 'edited', ...where(y) };
}

/**
 * Estimated tokens two requests share from the start: the cumulative tokens of the last block whose cache
 * key agrees (keys are cumulative, so a binary search finds it). The quick form of {@link firstDivergence}.
 */
export function sharedPrefixTokens(
  a: readonly Pick<PrefixBlock, 'hash' | 'cumulativeTokens'>[],
  b: readonly Pick<PrefixBlock, 'hash' | 'cumulativeTokens'>[],
): number {
  let lo = 0;
  let hi = Math.min(a.length, b.length);
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (a[mid]?.hash === b[mid]?.hash) lo = mid + 1;
    else hi = mid;
  }
  return lo > 0 ? (b[lo - 1]?.cumulativeTokens ?? 0) : 0;
}
