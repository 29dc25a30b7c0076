// Rebuilds the prefix model from a capture record's blocks, so the cache models (which take a Prefix)
// run over captures exactly as they run in the simulator. No body, no text: keys, sizes and markers only.

import type { CapturedBlock, CapturedPrefix } from '../capture/capture-record.js';
import { LruMap } from '../core/lru-map.js';
import type { Prefix, PrefixBlock, PrefixLevel } from '../prefix/build-prefix.js';
import { TranscriptChain } from '../prefix/transcript.js';
import type { RequestBody, WireFormat } from '../wire/request-body.js';

const LEVELS: PrefixLevel[] = ['tools', 'system', 'messages'];

/** Every field a tools or system block is built from (its cumulative key `hash` already names all before it). */
function sharedKey(b: CapturedBlock, index: number, cumulative: number): string {
  const cc = b.cc ? `${b.cc.type}/${b.cc.ttl ?? ''}` : '';
  const tp = b.tp ? b.tp.join('/') : '';
  return `${b.hash}|${b.id}|${index}|${cumulative}|${b.level}|${b.kind}|${b.name ?? ''}|${b.message ?? ''}|${b.part ?? ''}|${b.role ?? ''}|${b.tokens}|${b.at}|${b.size}|${cc}|${b.empty === true}|${tp}`;
}

/**
 * Remembers the prefix blocks built for a capture's blocks, so a later record whose blocks share the
 * reader's objects (its delta base) reuses them: a record that adds one turn costs O(the new turn), and
 * blocks are held once however many records share them. Keyed by the first block; weakly held.
 */
export class CapturedPrefixReuse {
  /** Per first block, the latest chains that start with it, newest first (interleaved conversations that
   * send the same tools share their first block: each keeps its own chain). */
  private readonly chains = new WeakMap<CapturedBlock, Chain[]>();
  /** The chain the last {@link take} took over, replaced by the next {@link keep}. */
  private taken: { list: Chain[]; chain: Chain } | undefined;
  /**
   * Tools and system blocks by everything they are made of: every conversation of one agent sends the same
   * tools, and their blocks are held once across records that share no objects (the live analysis).
   */
  private readonly sharedBlocks = new LruMap<PrefixBlock>(4_096);

  /** The blocks and transcript states a record can take over, and how many. */
  take(captured: readonly CapturedBlock[]): {
    blocks: PrefixBlock[];
    states: Array<readonly number[]>;
  } {
    this.taken = undefined;
    const first = captured[0];
    const list = first ? this.chains.get(first) : undefined;
    if (!list) return { blocks: [], states: [] };
    let prev: Chain | undefined;
    let lo = 0;
    for (const c of list) {
      const n = sharedObjects(c.captured, captured);
      if (n > lo) {
        lo = n;
        prev = c;
      }
    }
    if (!prev) return { blocks: [], states: [] };
    // Only the tools and system shared: another conversation's chain, which stays as it is.
    if (prev.captured[lo - 1]?.level !== 'messages')
      return { blocks: prev.blocks.slice(0, lo), states: prev.states.slice(0, lo) };
    this.taken = { list, chain: prev };
    // The same conversation: the next keep replaces this chain. Its states are only ever read here: cut
    // them in place rather than copy them (the blocks are the prefix's own, and an earlier prefix still
    // holds the old list).
    prev.states.length = lo;
    return { blocks: prev.blocks.slice(0, lo), states: prev.states };
  }

  /** A tools or system block built before for other records with the same key (see {@link sharedKey}). */
  shared(key: string): PrefixBlock | undefined {
    return this.sharedBlocks.get(key);
  }

  share(key: string, block: PrefixBlock): void {
    this.sharedBlocks.set(key, block);
  }

  keep(captured: readonly CapturedBlock[], blocks: PrefixBlock[], states: Array<readonly number[]>): void {
    const taken = this.taken;
    this.taken = undefined;
    const first = captured[0];
    if (!first) return;
    let list = this.chains.get(first);
    if (!list) {
      list = [];
      this.chains.set(first, list);
    }
    const at = taken?.list === list ? list.indexOf(taken.chain) : -1;
    if (at >= 0) list.splice(at, 1);
    list.unshift({ captured, blocks, states });
    if (list.length > MAX_CHAINS) list.length = MAX_CHAINS;
  }
}

interface Chain {
  captured: readonly CapturedBlock[];
  blocks: PrefixBlock[];
  states: Array<readonly number[]>;
}

/** Chains kept per first block: as many interleaved conversations as the proxy's prefix builder keeps. */
const MAX_CHAINS = 64;

/** How many leading blocks two lists share as the very same objects (they form a prefix: binary search). */
function sharedObjects(a: readonly CapturedBlock[], b: readonly CapturedBlock[]): number {
  let lo = 0;
  let hi = Math.min(a.length, b.length);
  while (lo < hi) {
    const mid = (lo + hi + 1) >>> 1;
    if (a[mid - 1] === b[mid - 1]) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/** A Prefix whose blocks come from a capture. `body` is empty: nothing here may read request text. */
export function prefixFromCapture(
  captured: CapturedPrefix,
  model: string | undefined,
  betas: readonly string[] = [],
  reuse?: CapturedPrefixReuse,
): Prefix {
  const taken = reuse?.take(captured.blocks) ?? { blocks: [], states: [] };
  const blocks = taken.blocks;
  const states = taken.states;
  const from = blocks.length;
  let cumulative = from ? (blocks[from - 1] as PrefixBlock).cumulativeTokens : 0;
  const transcript = new TranscriptChain();
  if (from) transcript.load(states[from - 1] as readonly number[]);
  for (let i = from; i < captured.blocks.length; i++) {
    const b = captured.blocks[i] as CapturedBlock;
    cumulative += b.tokens;
    const shareable = b.level !== 'messages' && reuse !== undefined;
    const key = shareable ? sharedKey(b, i, cumulative) : '';
    const known = shareable ? reuse.shared(key) : undefined;
    if (known) blocks.push(known);
    else {
      // Every block gets every field, in one order: one object shape (a shape per block cost 25 MB of
      // hidden classes in the live analysis of 1,000 conversations).
      const block: PrefixBlock = {
        index: i,
        level: b.level,
        kind: b.kind,
        name: b.name,
        messageIndex: b.message,
        partIndex: b.part,
        role: b.role,
        contentHash: b.id,
        hash: b.hash,
        tokens: b.tokens,
        cumulativeTokens: cumulative,
        span: { start: b.at, end: b.at + b.size },
        cacheControl: b.cc,
        emptyText: b.empty === true,
        toolParts: b.tp ? { schema: b.tp[0], description: b.tp[1], other: b.tp[2] } : undefined,
        transcript: b.level === 'messages' ? transcript.next(b.role, b.id) : undefined,
      };
      if (shareable) reuse.share(key, block);
      blocks.push(block);
    }
    states.push(transcript.save());
  }
  reuse?.keep(captured.blocks, blocks, states);
  const levels = {} as Record<PrefixLevel, Prefix['levels'][PrefixLevel]>;
  for (const level of LEVELS) {
    let start = blocks.findIndex((b) => b.level === level);
    let end = start;
    if (start < 0) {
      // An empty level sits where the next level starts.
      const after = LEVELS.slice(LEVELS.indexOf(level) + 1)
        .map((l) => blocks.findIndex((b) => b.level === l))
        .find((i) => i >= 0);
      start = after ?? blocks.length;
      end = start;
    } else {
      while (end < blocks.length && blocks[end]?.level === level) end++;
    }
    levels[level] = {
      start,
      end,
      params: captured.params?.[level] ?? {},
      // Captures from before fold hashes were kept: the level's parameters stand in (same level, same params).
      foldHash: captured.folds?.[level] ?? `${level}:${JSON.stringify(captured.params?.[level] ?? {})}`,
    };
  }
  const body = {
    format: captured.format as WireFormat,
    bytes: Buffer.alloc(0),
    units: [],
    fields: {},
    fieldSpans: new Map(),
    betas: [...betas],
    value: () => ({}),
  } as unknown as RequestBody;
  const prefix: Prefix = {
    format: captured.format as WireFormat,
    model,
    blocks,
    levels,
    deferredTools: captured.deferredTools ?? [],
    totalTokens: cumulative,
    body,
  };
  if (captured.auto) prefix.autoCacheControl = captured.auto;
  return prefix;
}
