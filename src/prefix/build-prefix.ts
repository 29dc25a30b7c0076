// Builds the prefix model of a request: ordered blocks with identities, cumulative hashes and token counts,
// with the render-affecting parameters folded in at the level they invalidate (SPEC-caching.md). Pure.

import { hash } from 'node:crypto';
import { drainSteps, STEP_BYTES, STEP_ITEMS } from '../core/steps.js';
import { sharedByteCount } from '../wire/json-scan.js';
import {
  type ByteSpan,
  type ParseRequestOptions,
  type PrefixLevel,
  parseRequestBodySteps,
  type RawUnit,
  type RequestBody,
  unitsTakenOver,
  type WireFormat,
} from '../wire/request-body.js';
import { billingHeaderUnit } from './billing-header.js';
import { KeyChain } from './key-chain.js';
import { stableJson } from './stable-json.js';
import { TranscriptChain } from './transcript.js';
import {
  type CacheMarker,
  type ToolParts,
  type UnitInfo,
  UnitReader,
  type UnitReaderOptions,
} from './unit-info.js';

export type { PrefixLevel } from '../wire/request-body.js';

/** One block of the cached prefix. */
export interface PrefixBlock {
  /** Position in the whole prefix (tools, then system, then messages). */
  index: number;
  level: PrefixLevel;
  /** `tool`, the content block type (`text`, `tool_use`, `image`, …), `tool_call`, a Responses item type, or `empty`. */
  kind: string;
  /** The tool's name (tools, tool_use blocks, tool calls). */
  name?: string;
  /** For messages: which message (or Responses input item) and which part of it. */
  messageIndex?: number;
  partIndex?: number;
  role?: string;
  /** The block's identity: sha256 of its canonical JSON without cache markers. */
  contentHash: string;
  /** The cache key of the prefix ending at this block (everything before it, folded parameters, and it). */
  hash: string;
  /** Estimated tokens of this block, and of the whole prefix up to and including it. */
  tokens: number;
  cumulativeTokens: number;
  /** Where the block is in the body, in bytes. */
  span: ByteSpan;
  cacheControl?: CacheMarker;
  /** A text block with empty text (it cannot carry a cache marker). */
  emptyText?: boolean;
  /** Tool definitions: identities of their schema, description and other fields. */
  toolParts?: ToolParts;
  /** Messages-level blocks: the transcript key after this block; none in the leading system/developer messages. */
  transcript?: string;
}

/** The parameters folded in at the start of a level, and the blocks of that level `[start, end)`. */
export interface PrefixLevelInfo {
  start: number;
  end: number;
  params: Readonly<Record<string, unknown>>;
  /** Hash after folding `params` into everything before this level. */
  foldHash: string;
}

/** The prefix model of one request. */
export interface Prefix {
  format: WireFormat;
  model: string | undefined;
  blocks: PrefixBlock[];
  levels: Readonly<Record<PrefixLevel, PrefixLevelInfo>>;
  /** Tools with `defer_loading: true`: not part of the hashed tool list (only their existence is). */
  deferredTools: string[];
  totalTokens: number;
  /** A top-level `cache_control` (automatic caching), when sent. */
  autoCacheControl?: CacheMarker;
  /**
   * Claude Code's billing line (its first system block, `x-anthropic-billing-header: …`), when present:
   * left out of blocks, keys and tokens, as the Anthropic API keeps it outside the cache key (observed;
   * see billing-header.ts).
   */
  billingHeader?: ByteSpan;
  body: RequestBody;
}

export const LEVELS: readonly PrefixLevel[] = ['tools', 'system', 'messages'];

/** Where every key chain starts (bumped when the key derivation changes). */
export const PREFIX_SEED = 'cacheward-prefix-v2';

/** The fold at the start of `level`: everything before it (`running`) with the level's parameters. */
export function foldLevel(
  running: string,
  level: PrefixLevel,
  params: Readonly<Record<string, unknown>>,
): string {
  return hash('sha256', `${running}\n${level}\n${stableJson(params)}`, 'hex');
}

/** A parameter that is rendered into the prompt: which level it invalidates and which top-level field holds it. */
interface ParamRule {
  name: string;
  level: PrefixLevel;
  field?: string;
  read: (f: Readonly<Record<string, unknown>>, ctx: DerivedFlags) => unknown;
}

interface DerivedFlags {
  images: boolean;
  citations: boolean;
  deferLoading: boolean;
  webSearch: boolean;
  betas: readonly string[];
  format: WireFormat;
}

const get = (v: unknown, ...path: string[]): unknown => {
  let cur = v;
  for (const p of path) {
    if (cur === null || typeof cur !== 'object') return undefined;
    cur = (cur as Record<string, unknown>)[p];
  }
  return cur;
};

/** The model's default effort; an explicit default equals omitting it (prompt-caching.md). Model choice. */
const DEFAULT_EFFORT = 'high';

const ANTHROPIC_PARAMS: ParamRule[] = [
  { name: 'format', level: 'tools', read: (_f, c) => c.format },
  { name: 'model', level: 'tools', field: 'model', read: (f) => f.model },
  { name: 'defer_loading', level: 'tools', field: 'tools', read: (_f, c) => c.deferLoading || undefined },
  { name: 'speed', level: 'system', field: 'speed', read: (f) => f.speed },
  { name: 'web_search', level: 'system', field: 'tools', read: (_f, c) => c.webSearch || undefined },
  { name: 'citations', level: 'system', read: (_f, c) => c.citations || undefined },
  { name: 'tool_choice', level: 'messages', field: 'tool_choice', read: (f) => f.tool_choice },
  {
    name: 'thinking',
    level: 'messages',
    field: 'thinking',
    read: (f) => {
      const t = f.thinking;
      if (t === null || typeof t !== 'object') return t;
      return { type: get(t, 'type'), budget_tokens: get(t, 'budget_tokens') };
    },
  },
  {
    name: 'effort',
    level: 'messages',
    field: 'output_config',
    read: (f) => {
      const e = get(f.output_config, 'effort');
      return e === DEFAULT_EFFORT ? undefined : e;
    },
  },
  {
    name: 'context_management',
    level: 'messages',
    field: 'context_management',
    read: (f) => f.context_management,
  },
  {
    name: 'output_format',
    level: 'messages',
    field: 'output_config',
    read: (f) => get(f.output_config, 'format') ?? f.output_format,
  },
  { name: 'images', level: 'messages', read: (_f, c) => c.images || undefined },
  { name: 'anthropic-beta', level: 'messages', read: (_f, c) => (c.betas.length ? c.betas : undefined) },
];

const OPENAI_CHAT_PARAMS: ParamRule[] = [
  { name: 'format', level: 'tools', read: (_f, c) => c.format },
  { name: 'model', level: 'tools', field: 'model', read: (f) => f.model },
  { name: 'prompt_cache_key', level: 'tools', field: 'prompt_cache_key', read: (f) => f.prompt_cache_key },
  {
    name: 'parallel_tool_calls',
    level: 'tools',
    field: 'parallel_tool_calls',
    read: (f) => f.parallel_tool_calls,
  },
  { name: 'response_format', level: 'tools', field: 'response_format', read: (f) => f.response_format },
  { name: 'reasoning_effort', level: 'tools', field: 'reasoning_effort', read: (f) => f.reasoning_effort },
  { name: 'verbosity', level: 'tools', field: 'verbosity', read: (f) => f.verbosity },
  {
    name: 'context_management',
    level: 'tools',
    field: 'context_management',
    read: (f) => f.context_management,
  },
];

const OPENAI_RESPONSES_PARAMS: ParamRule[] = [
  { name: 'format', level: 'tools', read: (_f, c) => c.format },
  { name: 'model', level: 'tools', field: 'model', read: (f) => f.model },
  { name: 'prompt_cache_key', level: 'tools', field: 'prompt_cache_key', read: (f) => f.prompt_cache_key },
  {
    name: 'parallel_tool_calls',
    level: 'tools',
    field: 'parallel_tool_calls',
    read: (f) => f.parallel_tool_calls,
  },
  { name: 'text.format', level: 'tools', field: 'text', read: (f) => get(f.text, 'format') },
  { name: 'text.verbosity', level: 'tools', field: 'text', read: (f) => get(f.text, 'verbosity') },
  { name: 'reasoning.effort', level: 'tools', field: 'reasoning', read: (f) => get(f.reasoning, 'effort') },
  {
    name: 'context_management',
    level: 'tools',
    field: 'context_management',
    read: (f) => f.context_management,
  },
  {
    name: 'previous_response_id',
    level: 'messages',
    field: 'previous_response_id',
    read: (f) => f.previous_response_id,
  },
];

/** The parameter rules of a format: what is folded in at which level. */
export function paramRules(format: WireFormat): readonly ParamRule[] {
  return format === 'anthropic-messages'
    ? ANTHROPIC_PARAMS
    : format === 'openai-chat'
      ? OPENAI_CHAT_PARAMS
      : OPENAI_RESPONSES_PARAMS;
}

/** The top-level field that holds a parameter, for byte offsets; undefined for derived ones. */
export function paramField(format: WireFormat, name: string): string | undefined {
  return paramRules(format).find((r) => r.name === name)?.field;
}

/** Options for {@link PrefixBuilder}: the token estimator, memo size, and how many bodies it keeps. */
export interface PrefixBuilderOptions extends UnitReaderOptions {
  /**
   * Bodies kept to extend from: at most `bodies` of them holding at most `bytes` of body bytes (the newest
   * two are always kept). Defaults: 8 bodies, 8 MB (about three times that in memory, with their scans).
   */
  keep?: { bodies?: number; bytes?: number };
}

/**
 * Default bound on the bodies a builder keeps to extend from: a few interleaved conversations, each with its
 * client and forwarded body. What is kept is a body's bytes and its scan, not its conversation's: more
 * conversations than this interleaved are each parsed whole (docs/performance.md has the trade).
 */
export const KEPT_BODIES = 8;
export const KEPT_BYTES = 8 * 1024 * 1024;

/**
 * Builds prefixes. Keep one per process (or per analysis) so block identities are remembered across
 * requests: a request that extends an earlier one only computes its new blocks.
 */
export class PrefixBuilder {
  readonly units: UnitReader;
  /**
   * The bodies built most recently, newest first, within the keep bound: a new body extends from the one
   * it shares the most leading bytes with (its conversation's previous request, even with many other
   * conversations in between), and units with unchanged bytes reuse their results.
   */
  private previous: PreviousBody[] = [];
  private keptBytes = 0;
  private readonly keepBodies: number;
  private readonly keepBytes: number;

  constructor(options: PrefixBuilderOptions = {}) {
    this.units = new UnitReader(options);
    this.keepBodies = Math.max(2, options.keep?.bodies ?? KEPT_BODIES);
    this.keepBytes = Math.max(0, options.keep?.bytes ?? KEPT_BYTES);
  }

  /** Parses a body and builds its prefix. */
  parse(input: Uint8Array | string, options: ParseRequestOptions = {}): Prefix {
    return drainSteps(this.parseSteps(input, options));
  }

  /**
   * {@link parse} in bounded steps (a few hundred units or a few hundred KB between yields), so a shell
   * can spread a huge body over turns of its event loop; other parses and builds may run between its
   * steps. The same parse: `parse` runs it to the end.
   */
  *parseSteps(input: Uint8Array | string, options: ParseRequestOptions = {}): Generator<void, Prefix> {
    // The scan takes over the nodes of the kept body that shares the most leading bytes with this one.
    let previous = options.previous;
    let shared: number | undefined;
    if (!previous && typeof input !== 'string' && this.previous.length) {
      const found = this.closest(input);
      previous = found?.body;
      shared = found?.shared;
    }
    // The shared bytes just counted are handed on (the scan and the UTF-8 check skip them).
    const body = yield* parseRequestBodySteps(
      input,
      previous
        ? { ...options, previous, ...(shared !== undefined ? { previousSharedBytes: shared } : {}) }
        : options,
    );
    return yield* this.buildSteps(body, previous);
  }

  /** How many bodies are kept to extend from, and their bytes. */
  keptSize(): { bodies: number; bytes: number } {
    return { bodies: this.previous.length, bytes: this.keptBytes };
  }

  /**
   * The kept body that shares the most leading bytes with `input`: every kept body is ranked by a few
   * probes (O(1) each), and only the best two are compared byte by byte. A hint only: the scan and the
   * unit reuse verify every byte they take over.
   */
  private closest(input: Uint8Array): { body: RequestBody; shared: number } | undefined {
    let first: PreviousBody | undefined;
    let second: PreviousBody | undefined;
    let s1 = -1;
    let s2 = -1;
    for (const p of this.previous) {
      const s = probeShared(input, p.body.bytes);
      if (s > s1) {
        second = first;
        s2 = s1;
        first = p;
        s1 = s;
      } else if (s > s2) {
        second = p;
        s2 = s;
      }
    }
    if (!first) return undefined;
    const n1 = sharedByteCount(input, first.body.bytes);
    if (!second) return { body: first.body, shared: n1 };
    // The second can share more only if it has the byte at n1 that the input has (the first does not):
    // one byte answers what a second count of the whole shared prefix would.
    const b = second.body.bytes;
    if (n1 >= b.length || n1 >= input.length || b[n1] !== input[n1]) return { body: first.body, shared: n1 };
    const n2 = sharedByteCount(input, b);
    return n2 > n1 ? { body: second.body, shared: n2 } : { body: first.body, shared: n1 };
  }

  /** Builds the prefix of an already parsed body. */
  build(body: RequestBody): Prefix {
    return drainSteps(this.buildSteps(body));
  }

  /** {@link build} in bounded steps; `scannedFrom` is the body the scan took nodes over from, if any. */
  private *buildSteps(body: RequestBody, scannedFrom?: RequestBody): Generator<void, Prefix> {
    const { infos, flagged, base, shared, billing } = yield* this.readUnitSteps(body, scannedFrom);
    const flags: DerivedFlags = {
      images: false,
      citations: false,
      deferLoading: false,
      webSearch: false,
      betas: body.betas,
      format: body.format,
    };
    const deferredTools: string[] = [];
    for (const i of flagged) {
      const info = infos[i] as UnitInfo;
      if (info.hasImage) flags.images = true;
      if (info.citations) flags.citations = true;
      if (info.deferLoading) {
        flags.deferLoading = true;
        deferredTools.push(info.name ?? '?');
      }
      if (info.serverTool?.startsWith('web_search')) flags.webSearch = true;
    }
    const params: Record<PrefixLevel, Record<string, unknown>> = { tools: {}, system: {}, messages: {} };
    for (const rule of paramRules(body.format)) {
      const v = rule.read(body.fields, flags);
      if (v !== undefined) params[rule.level][rule.name] = v;
    }

    const blocks: PrefixBlock[] = [];
    const levels = {} as Record<PrefixLevel, PrefixLevelInfo>;
    let running = PREFIX_SEED;
    let tokens = 0;
    let u = 0;
    const chain = new KeyChain();
    const transcript = new TranscriptChain();
    // The extend path: the leading units this body shares with `base` (same bytes, place and message)
    // take over base's blocks as they are; the chains resume from the last one taken.
    const unitBlock: Array<PrefixBlock | undefined> = new Array(body.units.length);
    const chainStates: Array<readonly number[]> = [];
    const transcriptStates: Array<readonly number[]> = [];
    let reuse = false;
    let resumeFrom = -1;
    const resume = () => {
      if (resumeFrom < 0 || !base) return;
      chain.load(base.chainStates[resumeFrom] as readonly number[]);
      transcript.load(base.transcriptStates[resumeFrom] as readonly number[]);
      resumeFrom = -1;
    };
    for (const level of LEVELS) {
      running = foldLevel(running, level, params[level]);
      chain.reset(running);
      resumeFrom = -1;
      const foldHash = running;
      const start = blocks.length;
      // Each level takes over base's blocks from its start when everything before it is the same: the same
      // fold (so the same keys and parameters before it), as many blocks and tokens before it, the same
      // billing line. A level before it that was built anew (a body whose tools follow its messages: their
      // bytes moved) does not stop its messages from being taken over.
      const baseLevel = base?.levels[level];
      reuse =
        base !== undefined &&
        base.billing === billing &&
        baseLevel !== undefined &&
        baseLevel.foldHash === foldHash &&
        baseLevel.start === start &&
        (base.built?.blocks[start - 1]?.cumulativeTokens ?? 0) === tokens;
      const levelEnd = levelEndOf(body.units, u, level);
      const tookMessages = reuse && level === 'messages';
      for (; u < levelEnd; u++) {
        if (reuse && base?.built) {
          // The run of units that are base's very units (the parse took them over): their blocks, chain
          // and transcript states are base's, copied in bulk without looking into any of them.
          const built = base.built;
          const baseUnits = base.body.units;
          const runEnd = Math.min(shared, levelEnd);
          const v = runOfSame(body.units, baseUnits, u, 0, runEnd);
          if (v > u) {
            // A unit has at most one block, in order: the run's blocks are base's from t0 to t1.
            const [t0, t1] = copyUnitBlocks(built.unitBlock, unitBlock, u, v);
            if (t0 && t1) {
              pushAll(blocks, built.blocks, t0.index, t1.index + 1);
              pushAll(chainStates, built.chainStates, t0.index, t1.index + 1);
              pushAll(transcriptStates, built.transcriptStates, t0.index, t1.index + 1);
              running = t1.hash;
              tokens = t1.cumulativeTokens;
              resumeFrom = t1.index;
            }
            u = v;
            if (u >= levelEnd) break;
          }
        }
        if (u % STEP_ITEMS === STEP_ITEMS - 1) yield;
        const unit = body.units[u];
        const info = infos[u];
        if (reuse && base && unit && !sameMessagePlace(unit, base.body.units[u], u < shared)) {
          reuse = false;
        }
        if (reuse && base && u < shared) {
          const taken = base.unitBlock[u];
          unitBlock[u] = taken;
          if (!taken) continue;
          blocks.push(taken);
          chainStates.push(base.chainStates[taken.index] as readonly number[]);
          transcriptStates.push(base.transcriptStates[taken.index] as readonly number[]);
          running = taken.hash;
          tokens = taken.cumulativeTokens;
          resumeFrom = taken.index;
          continue;
        }
        reuse = false;
        if (!unit || !info || info.deferLoading || u === billing) continue;
        resume();
        // A message's first block also carries the message boundary, its role and its other fields.
        if (unit.messageHeader !== undefined) chain.absorb(messageStart(unit.role ?? '', unit.messageHeader));
        chain.absorb(info.contentHash);
        running = chain.key();
        tokens += info.tokens;
        // Every block gets every field (undefined where absent): one object shape keeps later code fast.
        const block: PrefixBlock = {
          index: blocks.length,
          level,
          kind: info.kind,
          name: info.name,
          messageIndex: unit.messageIndex,
          partIndex: unit.partIndex,
          role: unit.role,
          contentHash: info.contentHash,
          hash: running,
          tokens: info.tokens,
          cumulativeTokens: tokens,
          span: unit.span,
          cacheControl: info.cacheControl,
          emptyText: info.emptyText,
          toolParts: info.toolParts,
          transcript: level === 'messages' ? transcript.next(unit.role, info.contentHash) : undefined,
        };
        blocks.push(block);
        unitBlock[u] = block;
        chainStates.push(chain.save());
        transcriptStates.push(transcript.save());
      }
      levels[level] = { start, end: blocks.length, params: params[level], foldHash };
      // How many leading blocks are base's (its messages taken over from their start): for what is derived
      // from blocks alone (message ends) to be extended rather than derived again.
      if (tookMessages && base?.built) {
        const n = sameRunEnd(blocks, base.built.blocks, start, 0, blocks.length);
        if (n > start) takenBlocks.set(blocks, { from: new WeakRef(base.built.blocks), count: n });
      }
    }
    // A body that holds all of its base's units but its last (the turn the client appended after it, the
    // cache marker moved on) supersedes it: the next request of the conversation extends this one, so the
    // base stops taking a place in the kept list (which then holds conversations, not their old turns).
    const superseded = base && shared >= base.body.units.length - 1 ? base.body : undefined;
    this.keep(
      body,
      infos,
      flagged,
      { blocks, unitBlock, chainStates, transcriptStates, levels, billing },
      scannedFrom,
      superseded,
    );
    const model = typeof body.fields.model === 'string' ? body.fields.model : undefined;
    const prefix: Prefix = {
      format: body.format,
      model,
      blocks,
      levels,
      deferredTools,
      totalTokens: tokens,
      body,
    };
    if (billing >= 0) prefix.billingHeader = (body.units[billing] as RawUnit).span;
    const auto = body.fields.cache_control;
    if (auto && typeof auto === 'object') prefix.autoCacheControl = auto as CacheMarker;
    return prefix;
  }

  /**
   * Reads every unit. A unit whose bytes equal a unit of the body the scan took over or of the two newest
   * kept bodies (a memcmp, no hashing) reuses that result: a request that extends an earlier one only
   * hashes its new blocks. The match is looked for where the previous match left off, so units shifted by
   * an insertion (a fix's placeholder tool, an announcement) or by the proxy parsing the client's body and
   * then the forwarded one still match.
   */
  private *readUnitSteps(
    body: RequestBody,
    scannedFrom: RequestBody | undefined,
  ): Generator<
    void,
    { infos: UnitInfo[]; flagged: number[]; base: PreviousBody | undefined; shared: number; billing: number }
  > {
    const billing = billingHeaderUnit(body);
    // The body the scan took over first, then the two newest others (a client's body and its forwarded
    // one sit next to each other).
    const prevs: PreviousBody[] = [];
    const usable = (p: PreviousBody) => p.body.format === body.format && p.built !== undefined;
    const chosen = this.previous.find((p) => p.body === scannedFrom);
    if (chosen && usable(chosen)) prevs.push(chosen);
    for (let k = 0, others = 0; k < this.previous.length && others < 2; k++) {
      const p = this.previous[k] as PreviousBody;
      if (p === chosen || p.body === body || !usable(p)) continue;
      prevs.push(p);
      others++;
    }
    const infos: UnitInfo[] = new Array(body.units.length);
    const deltas = prevs.map(() => 0);
    // How many leading units each previous body shares at the same index.
    const leading = prevs.map(() => 0);
    let misses = 0;
    let stepBytes = 0;
    const first = prevs[0];
    // The run of units the parse took over from the first body (the scan's), and where it starts here.
    const takenOver = first ? unitsTakenOver(body.units) : undefined;
    const takenAt = takenOver && takenOver.from === first?.body.units ? takenOver.at : -1;
    // The units whose results set a flag (an image, citations, a deferred or server tool), in order.
    const flagged: number[] = [];
    for (let i = 0; i < body.units.length; i++) {
      // The run of units the parse took over from the first body at the place the last match left off
      // (the very unit objects): their results are that body's, without a test per pass or a byte compare.
      if (first && first.body === scannedFrom) {
        const fromUnits = first.body.units;
        // Where the parse's record of the run it took over from the first body starts, the record says
        // where that run is in the first body: the last match's place may be another body's (a client's
        // body and its forwarded one match the tools and system at different places).
        const taken = i === takenAt ? takenOver : undefined;
        if (taken) deltas[0] = taken.fromAt - i;
        const d = deltas[0] as number;
        const run = runOfSame(body.units, fromUnits, i, d, body.units.length);
        if (run > i) {
          // Pointer copies only: the units and their results are not looked into (a long history's
          // objects lie all over the heap, and touching each one is what costs).
          copyShifted(first.infos, infos, i, run, d);
          // How many leading units each body shares at the same index, as the general path counts it.
          if (d === 0 && leading[0] === i) leading[0] = run;
          for (let k = d === 0 ? 1 : 0; k < prevs.length; k++) {
            if (leading[k] !== i) continue;
            const other = (prevs[k] as PreviousBody).body;
            // The very unit objects at the same index first (a body that took them over from the same
            // body as this one): a pointer compare per unit, nothing looked into; then unit by unit.
            let x = sameRunEnd(body.units, other.units, i, 0, Math.min(run, other.units.length));
            while (x < run && sameUnit(body, body.units[x] as RawUnit, other, x)) x++;
            leading[k] = x;
          }
          // The flagged units among them are the first body's flagged ones in that range.
          const from = first.flagged;
          for (let f = firstAtOrAfter(from, i + d); f < from.length && (from[f] as number) < run + d; f++)
            flagged.push((from[f] as number) - d);
          this.units.stats.reused += run - i;
          misses = 0;
          i = run - 1;
          continue;
        }
      }
      const u = body.units[i] as RawUnit;
      this.units.stats.compared++;
      stepBytes += u.span.end - u.span.start;
      if (i % STEP_ITEMS === STEP_ITEMS - 1 || stepBytes >= STEP_BYTES) {
        yield;
        stepBytes = 0;
      }
      let info: UnitInfo | undefined;
      // Where the last match left off in each body, then a few places either side, then (unless this is
      // a run of new units) that body's index by length.
      for (let pass = 0; pass < 3 && !info; pass++) {
        if (pass === 2 && misses >= 8) break;
        // A long run of units no kept body has means another conversation's body: the kept bodies are not
        // searched for the rest of it (the unit memo still finds what it shares, by hash).
        if (misses >= MAX_MISS_RUN) break;
        for (let k = 0; k < prevs.length && !info; k++) {
          const prev = prevs[k] as PreviousBody;
          const at = i + (deltas[k] as number);
          let j = -1;
          if (pass === 0) j = sameUnit(body, u, prev.body, at) ? at : -1;
          else if (pass === 1) {
            for (let d = 1; d <= 3 && j < 0; d++) {
              if (sameUnit(body, u, prev.body, at + d)) j = at + d;
              else if (sameUnit(body, u, prev.body, at - d)) j = at - d;
            }
          } else j = prev.find(body, u, at);
          if (j >= 0) {
            info = prev.infos[j];
            deltas[k] = j - i;
            if (j === i && leading[k] === i) leading[k] = i + 1;
          }
        }
      }
      misses = info ? 0 : misses + 1;
      // A body that matched at the same index from the start also counts further along, if it still does.
      // Claude Code's billing line counts as shared when both bodies have it at this index: it is left out
      // of every block, key and token count, so a new `cch=` in it on every request changes nothing after it.
      for (let k = 0; k < prevs.length; k++) {
        const prev = prevs[k] as PreviousBody;
        if (
          leading[k] === i &&
          (sameUnit(body, u, prev.body, i) || (i === billing && prev.built?.billing === i))
        )
          leading[k] = i + 1;
      }
      if (info) {
        infos[i] = info;
        this.units.stats.reused++;
      } else info = infos[i] = this.units.read(body.bytes, u, body.format);
      if (isFlagged(info)) flagged.push(i);
    }
    let base: PreviousBody | undefined;
    let shared = 0;
    prevs.forEach((p, k) => {
      if ((leading[k] as number) > shared) {
        base = p;
        shared = leading[k] as number;
      }
    });
    return { infos, flagged, base, shared, billing };
  }

  private keep(
    body: RequestBody,
    infos: UnitInfo[],
    flagged: number[],
    built: BuiltBlocks,
    scannedFrom: RequestBody | undefined,
    superseded?: RequestBody,
  ): void {
    const kept = new PreviousBody(body, infos, flagged);
    kept.built = built;
    const list = [kept];
    let bytes = body.bytes.length;
    // A resent body (a retry, a client polling with the same prompt) replaces its twin rather than filling
    // the kept list with copies.
    const from = scannedFrom;
    const twin =
      from && from.bytes.length === body.bytes.length && from.bytes.equals(body.bytes) ? from : undefined;
    for (const p of this.previous) {
      if (p.body === body || p.body === twin || p.body === superseded) continue;
      const next = bytes + p.body.bytes.length;
      // The newest two always stay (a client's body and its forwarded one); older ones within the bound.
      if (list.length >= 2 && (list.length >= this.keepBodies || next > this.keepBytes)) break;
      list.push(p);
      bytes = next;
    }
    this.previous = list;
    this.keptBytes = bytes;
  }

  /** Forgets the bodies kept to extend from (their bytes are released). */
  forget(): void {
    this.previous = [];
    this.keptBytes = 0;
  }
}

/** Bytes compared at each probe of {@link probeShared}. */
const PROBE_BYTES = 8;
/** Where the probes sit, as fractions of the shorter body: denser towards its end, where a conversation's
 * previous request stops sharing bytes with its next one. */
const PROBE_AT = [1 / 16, 1 / 8, 1 / 4, 1 / 2, 3 / 4, 7 / 8, 15 / 16, 31 / 32, 63 / 64, 1];

/**
 * A cheap estimate of how many leading bytes `a` and `b` share: the end of the last of the probe windows
 * (at fixed fractions of the shorter length) that all match from the first on. O(1): a ranking, not a count.
 */
function probeShared(a: Uint8Array, b: Uint8Array): number {
  const n = Math.min(a.length, b.length);
  if (n <= PROBE_BYTES * PROBE_AT.length) return sharedByteCount(a, b);
  let score = 0;
  for (const f of PROBE_AT) {
    const end = Math.max(PROBE_BYTES, Math.floor(n * f));
    for (let i = end - PROBE_BYTES; i < end; i++) if (a[i] !== b[i]) return score;
    score = end;
  }
  return score;
}

/** Block lists that begin with a base's blocks: which list, and how many leading blocks are its. */
// The base's list is held weakly: a strong reference chained every earlier prefix of a conversation to the
// newest one (each list keeping its base's alive), so a long conversation's old block lists were never freed.
const takenBlocks = new WeakMap<
  readonly PrefixBlock[],
  { from: WeakRef<readonly PrefixBlock[]>; count: number }
>();

/**
 * When `blocks` (a prefix's) begins with the very blocks of an earlier prefix (a body that extended it,
 * its messages taken over from their start): that prefix's blocks and how many of them lead this list.
 */
export function blocksTakenOver(
  blocks: readonly PrefixBlock[],
): { from: readonly PrefixBlock[]; count: number } | undefined {
  const t = takenBlocks.get(blocks);
  const from = t?.from.deref();
  return t && from ? { from, count: t.count } : undefined;
}

const LEVEL_RANK: Readonly<Record<PrefixLevel, number>> = { tools: 0, system: 1, messages: 2 };

/** The end of `level`'s units from `from` on (units come level by level, in prompt order): a bisection. */
function levelEndOf(units: readonly RawUnit[], from: number, level: PrefixLevel): number {
  const rank = LEVEL_RANK[level];
  let lo = from;
  let hi = units.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (LEVEL_RANK[(units[mid] as RawUnit).level] <= rank) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

// The loops over a long shared run live in plain functions: inside the stepped (generator) build they ran
// several times slower than these, which V8 optimizes after a few calls.

/** The end of the run from `from` on where `a[i]` is `b[i + d]` (the very same object), at most `end`. */
function sameRunEnd(
  a: readonly unknown[],
  b: readonly unknown[],
  from: number,
  d: number,
  end: number,
): number {
  let i = from;
  while (i < end && a[i] === b[i + d]) i++;
  return i;
}

/**
 * {@link sameRunEnd} for unit lists: where the parse recorded the run of the earlier body's units it took
 * over and `from` starts it, the run's end is known without a compare per unit; elsewhere they are compared.
 */
function runOfSame(
  a: readonly RawUnit[],
  b: readonly RawUnit[],
  from: number,
  d: number,
  end: number,
): number {
  const taken = unitsTakenOver(a);
  if (taken && taken.from === b && taken.at === from && taken.fromAt === from + d)
    return Math.min(end, from + taken.count);
  return sameRunEnd(a, b, from, d, end);
}

/** `to[i] = from[i + d]` for `i` in `[start, end)`. */
function copyShifted<T>(from: readonly T[], to: T[], start: number, end: number, d: number): void {
  for (let i = start; i < end; i++) to[i] = from[i + d] as T;
}

/** Copies `from[start, end)` to `to` at the same indices; returns the first and last block copied. */
function copyUnitBlocks(
  from: ReadonlyArray<PrefixBlock | undefined>,
  to: Array<PrefixBlock | undefined>,
  start: number,
  end: number,
): [PrefixBlock | undefined, PrefixBlock | undefined] {
  let t0: PrefixBlock | undefined;
  let t1: PrefixBlock | undefined;
  for (let x = start; x < end; x++) {
    const t = from[x];
    to[x] = t;
    if (t) {
      t1 = t;
      t0 ??= t;
    }
  }
  return [t0, t1];
}

/** Appends `from[start, end)` to `to`, a chunk at a time (a spread of many more would overflow the stack). */
function pushAll<T>(to: T[], from: readonly T[], start: number, end: number): void {
  for (let at = start; at < end; at++) to.push(from[at] as T);
}

/** Whether a unit's result sets one of the derived flags (see `buildSteps`). */
function isFlagged(info: UnitInfo): boolean {
  return info.hasImage || info.citations || info.deferLoading || info.serverTool !== undefined;
}

/** The first index of sorted `list` whose value is at least `value`. */
function firstAtOrAfter(list: readonly number[], value: number): number {
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((list[mid] as number) < value) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Units in a row that no kept body has, after which the kept bodies are not searched for this body. */
const MAX_MISS_RUN = 16;

/** Whether `u` of `body` has the same form and bytes as unit `j` of `prev`. */
function sameUnit(body: RequestBody, u: RawUnit, prev: RequestBody, j: number): boolean {
  const p = prev.units[j];
  // The scan took this node over from the earlier body: the same bytes at the same place.
  if (p !== undefined && p.node === u.node && p.form === u.form) return true;
  return (
    p !== undefined &&
    p.form === u.form &&
    p.span.end - p.span.start === u.span.end - u.span.start &&
    body.bytes.compare(prev.bytes, p.span.start, p.span.end, u.span.start, u.span.end) === 0
  );
}

/** What a build made, per unit and per block, for the next build to take over. */
interface BuiltBlocks {
  blocks: readonly PrefixBlock[];
  unitBlock: Array<PrefixBlock | undefined>;
  /** The key chain's and the transcript's state after each block. */
  chainStates: Array<readonly number[]>;
  transcriptStates: Array<readonly number[]>;
  levels: Readonly<Record<PrefixLevel, PrefixLevelInfo>>;
  billing: number;
}

/** Whether a unit sits in the same message place as the base's unit at its index (so its block is the same). */
function sameMessagePlace(u: RawUnit, p: RawUnit | undefined, sharedBytes: boolean): boolean {
  return (
    sharedBytes &&
    p !== undefined &&
    p.level === u.level &&
    p.span.start === u.span.start &&
    p.messageIndex === u.messageIndex &&
    p.partIndex === u.partIndex &&
    p.role === u.role &&
    p.messageHeader === u.messageHeader
  );
}

/** A body kept to extend from, with what its build made. */
class PreviousBody {
  /** What its build made (set once built). */
  built: BuiltBlocks | undefined;
  constructor(
    readonly body: RequestBody,
    readonly infos: UnitInfo[],
    /** The indices of the units whose results set a flag, in order. */
    readonly flagged: readonly number[],
  ) {}

  get unitBlock() {
    return this.built?.unitBlock ?? [];
  }
  get chainStates() {
    return this.built?.chainStates ?? [];
  }
  get transcriptStates() {
    return this.built?.transcriptStates ?? [];
  }
  get levels(): Partial<Record<PrefixLevel, PrefixLevelInfo>> {
    return this.built?.levels ?? {};
  }
  get billing() {
    return this.built?.billing ?? -2;
  }

  /**
   * The unit of this body with the bytes of `u`, nearest at or after `from` (else before), within
   * {@link FIND_WINDOW} units of it; -1 if none. Bounded: no index of the whole body is built (a match
   * only saves reading the unit again, which gives the same result).
   */
  find(body: RequestBody, u: RawUnit, from: number): number {
    const units = this.body.units;
    const len = u.span.end - u.span.start;
    let tried = 0;
    for (let d = 0; d < 2 * FIND_WINDOW && tried < FIND_TRIES; d++) {
      // from, from - 1, from + 1, from - 2, ...: the nearest at or after `from` first.
      const at = d & 1 ? from - 1 - (d >>> 1) : from + (d >>> 1);
      const x = units[at];
      if (x === undefined || x.span.end - x.span.start !== len) continue;
      tried++;
      if (sameUnit(body, u, this.body, at)) return at;
    }
    return -1;
  }
}

/** How far from where the last match left off a unit is looked for, and how many equal-length ones are compared. */
const FIND_WINDOW = 32;
const FIND_TRIES = 16;

const messageStarts = new Map<string, Map<string, string>>();

/** The identity of a message boundary with its role and fields (interned: there are few distinct ones). */
export function messageStart(role: string, header: string): string {
  let byHeader = messageStarts.get(role);
  if (!byHeader) {
    byHeader = new Map();
    if (messageStarts.size < 1_000) messageStarts.set(role, byHeader);
  }
  let h = byHeader.get(header);
  if (!h) {
    h = hash('sha256', `message\n${role}\n${header}`, 'hex');
    if (byHeader.size < 10_000) byHeader.set(header, h);
  }
  return h;
}

let shared: PrefixBuilder | undefined;

/** Parses a body into its prefix with a process-wide builder (default estimator). */
export function parsePrefix(input: Uint8Array | string, options: ParseRequestOptions = {}): Prefix {
  shared ??= new PrefixBuilder();
  return shared.parse(input, options);
}
