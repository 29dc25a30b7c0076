// Rebuilds the prefix model from a capture record's blocks, so the cache models (which take a Prefix)
// run over captures exactly as they run in the simulator. No body, no text: keys, sizes and markers only.

import { LruMap } from '../core/lru-map.js';
import { drainSteps, STEP_ITEMS } from '../core/steps.js';
import type { Prefix, PrefixBlock, PrefixLevel } from '../prefix/build-prefix.js';
import { extendMessageEndsSteps, type MessageEnd, messageEndsSteps } from '../prefix/message-ends.js';
import { TranscriptChain } from '../prefix/transcript.js';
import type { CapturedBlock, CapturedPrefix } from '../record/capture-record.js';
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
/** What a chain remembers of its latest record. */
export interface CapturedChain {
  captured: readonly CapturedBlock[];
  blocks: PrefixBlock[];
  states: Array<readonly number[]>;
  /** Message ends of an earlier record of the chain, valid for its first `endsShared` blocks. */
  ends: MessageEnd[] | undefined;
  endsShared: number;
  /** The levels of the prefix built with `blocks`. */
  levels: Prefix['levels'] | undefined;
}

export class CapturedPrefixReuse {
  /** Per first block's cumulative key, the latest chains that start with it, newest first (interleaved
   * conversations that send the same tools share their first block: each keeps its own chain). By key, not
   * by object: Claude Code's tools come after its messages, so every record rebuilds them where they moved. */
  private readonly chains = new LruMap<CapturedChain[]>(MAX_FIRST_BLOCKS, (_, list) => {
    for (const chain of list) letGo(chain);
  });
  /** The chain the last {@link take} took over, replaced by the next {@link keep}. */
  private taken: { list: CapturedChain[]; chain: CapturedChain } | undefined;
  /**
   * Tools and system blocks by everything they are made of: every conversation of one agent sends the same
   * tools, and their blocks are held once across records that share no objects (the live analysis).
   */
  private readonly sharedBlocks = new LruMap<PrefixBlock>(4_096);
  /** Strings every record repeats (fold hashes, models, labels), held once however many records keep them. */
  private readonly strings = new Map<string, string>();
  /** The empty stand-in bodies, one per format and beta set (read-only: nothing reads request text). */
  private readonly bodies = new LruMap<RequestBody>(64);

  /** The blocks and transcript states a record can take over, and how many (`shared`). */
  take(captured: readonly CapturedBlock[]): {
    /** The chain's captured blocks: where they are the record's very objects, its blocks are taken over. */
    captured: readonly CapturedBlock[];
    blocks: readonly PrefixBlock[];
    states: Array<readonly number[]>;
    shared: number;
    chain: CapturedChain | undefined;
    /** The levels of the prefix built with `blocks`. */
    levels: Prefix['levels'] | undefined;
  } {
    this.taken = undefined;
    const first = captured[0];
    const list = first ? this.chains.get(first.hash) : undefined;
    let prev: CapturedChain | undefined;
    let lo = 0;
    for (const c of list ?? []) {
      const n = sharedKeys(c.captured, captured);
      if (n > lo) {
        lo = n;
        prev = c;
        // Every block shared, or every block of the chain's record but its last (the next turn of the
        // conversation it holds, which its keep put first): taken at once. A reuse only shares objects, so
        // a chain further on that shares more would give the same prefix.
        if (n === captured.length || n >= c.captured.length - 1) break;
      }
    }
    if (!list || !prev)
      return { captured: [], blocks: [], states: [], shared: 0, chain: undefined, levels: undefined };
    // Only the tools and system shared: another conversation's chain, which stays as it is.
    if (prev.captured[lo - 1]?.level !== 'messages')
      return {
        captured: prev.captured,
        blocks: prev.blocks,
        states: prev.states.slice(0, lo),
        shared: lo,
        chain: undefined,
        levels: prev.levels,
      };
    this.taken = { list, chain: prev };
    // The same conversation: the next keep replaces this chain. Its states are only ever read here: cut
    // them in place rather than copy them (the blocks are the prefix's own, and an earlier prefix still
    // holds the old list).
    prev.states.length = lo;
    return {
      captured: prev.captured,
      blocks: prev.blocks,
      states: prev.states,
      shared: lo,
      chain: prev,
      levels: prev.levels,
    };
  }

  /** A tools or system block built before for other records with the same key (see {@link sharedKey}). */
  shared(key: string): PrefixBlock | undefined {
    return this.sharedBlocks.get(key);
  }

  share(key: string, block: PrefixBlock): void {
    this.sharedBlocks.set(key, block);
  }

  /** One copy of a string records repeat (each parsed record has its own copy of every value). */
  intern(value: string): string {
    const known = this.strings.get(value);
    if (known !== undefined) return known;
    if (this.strings.size >= 4_096) this.strings.clear();
    this.strings.set(value, value);
    return value;
  }

  /** The stand-in body for a format and beta set, made once. */
  body(format: string, betas: readonly string[], make: () => RequestBody): RequestBody {
    const key = `${format}\n${betas.join('\n')}`;
    let body = this.bodies.get(key);
    if (!body) {
      body = make();
      this.bodies.set(key, body);
    }
    return body;
  }

  keep(
    captured: readonly CapturedBlock[],
    blocks: PrefixBlock[],
    states: Array<readonly number[]>,
    from: { chain: CapturedChain | undefined; shared: number },
    levels: Prefix['levels'],
  ): void {
    const taken = this.taken;
    this.taken = undefined;
    const first = captured[0];
    if (!first) return;
    const ends = from.chain?.ends;
    const endsShared = ends ? Math.min(from.chain?.endsShared ?? 0, from.shared) : 0;
    let list = this.chains.get(first.hash);
    if (!list) {
      list = [];
      this.chains.set(first.hash, list);
    }
    const at = taken?.list === list ? list.indexOf(taken.chain) : -1;
    // The chain taken over is nobody's now, but its record may still hold it (to let it go): not its arrays.
    if (taken && at >= 0) {
      list.splice(at, 1);
      letGo(taken.chain);
    }
    list.unshift({ captured, blocks, states, ends, endsShared, levels });
    // Chains past the bound go the same way (their records may still hold them).
    while (list.length > MAX_CHAINS) letGo(list.pop() as CapturedChain);
  }

  /** The chain the last build of `captured` into `prefix` kept (see {@link release}), if it is still kept. */
  chainOf(captured: readonly CapturedBlock[], prefix: Prefix): CapturedChain | undefined {
    const first = captured[0];
    const chain = first ? this.chains.peek(first.hash)?.[0] : undefined;
    return chain && chain.captured === captured && chain.blocks === prefix.blocks ? chain : undefined;
  }

  /**
   * Lets a chain go: its record is forgotten (the analysis no longer keeps it as a parent), and nothing of
   * its conversation came after it. A chain lives as long as its record is remembered, not as long as
   * the bounds allow (those would hold hundreds of blocks each of conversations long over). A chain a
   * later record took over is not kept any more, and letting it go again does nothing.
   */
  release(chain: CapturedChain): void {
    const first = chain.captured[0];
    const list = first ? this.chains.peek(first.hash) : undefined;
    if (!first || !list) return;
    const at = list.indexOf(chain);
    if (at < 0) return;
    list.splice(at, 1);
    letGo(chain);
    if (list.length === 0) this.chains.delete(first.hash);
  }

  /**
   * The message ends of `prefix`, built by {@link prefixFromCapture} from `captured` with this reuse: the
   * chain's earlier ends are kept where its blocks are shared, so a record that adds a turn costs O(the
   * new turn). The array is the chain's own, overwritten by its next record: read it before that.
   */
  messageEnds(captured: readonly CapturedBlock[], prefix: Prefix): MessageEnd[] {
    return drainSteps(this.messageEndsSteps(captured, prefix));
  }

  /** {@link messageEnds} in bounded steps (no other record of this reuse may be built meanwhile). */
  *messageEndsSteps(captured: readonly CapturedBlock[], prefix: Prefix): Generator<void, MessageEnd[]> {
    const first = captured[0];
    // The chain its keep just put first.
    const chain = first ? this.chains.get(first.hash)?.[0] : undefined;
    if (!chain || chain.captured !== captured || chain.blocks !== prefix.blocks)
      return yield* messageEndsSteps(prefix);
    const ends = yield* extendMessageEndsSteps(prefix, chain.ends ?? [], chain.ends ? chain.endsShared : 0);
    chain.ends = ends;
    chain.endsShared = prefix.blocks.length;
    return ends;
  }
}

/** A Prefix whose blocks come from a capture. `body` is empty: nothing here may read request text. */
export function prefixFromCapture(
  captured: CapturedPrefix,
  model: string | undefined,
  betas: readonly string[] = [],
  reuse?: CapturedPrefixReuse,
): Prefix {
  return drainSteps(prefixFromCaptureSteps(captured, model, betas, reuse));
}

/**
 * {@link prefixFromCapture} in bounded steps (it yields every {@link STEP_ITEMS} blocks it builds): the
 * same prefix. With a `reuse`, no other record may be built with it until the steps are done (it takes
 * a chain over at the start and keeps the new one at the end).
 */
export function* prefixFromCaptureSteps(
  captured: CapturedPrefix,
  model: string | undefined,
  betas: readonly string[] = [],
  reuse?: CapturedPrefixReuse,
): Generator<void, Prefix> {
  const taken = reuse?.take(captured.blocks);
  const states = taken?.states ?? [];
  const from = taken?.shared ?? 0;
  const before: readonly PrefixBlock[] = taken?.blocks ?? [];
  // The shared run is by cumulative key: a block the chain had as the very same captured object is taken
  // over; one with the same key but an object of its own (it moved in the body: Claude Code's tools and
  // system after its messages) is built again from its capture, with the chain's transcript key and state
  // (the same key: the same content up to it).
  const prior = taken?.captured ?? [];
  let first = 0;
  while (first < from && prior[first] === captured.blocks[first]) first++;
  // The blocks from `first` on, built here; the chain's before them are copied by the array's builtins when
  // the loop is done (several times faster than an element loop).
  const rest = new Array<PrefixBlock>(captured.blocks.length - first);
  let cumulative = first ? (before[first - 1] as PrefixBlock).cumulativeTokens : 0;
  const transcript = new TranscriptChain();
  if (from) transcript.load(states[from - 1] as readonly number[]);
  for (let i = first; i < captured.blocks.length; i++) {
    if ((i - first) % STEP_ITEMS === STEP_ITEMS - 1) yield;
    const b = captured.blocks[i] as CapturedBlock;
    cumulative += b.tokens;
    const twin = i < from;
    if (twin && (prior[i] === b || sameCaptured(prior[i] as CapturedBlock, b))) {
      rest[i - first] = before[i] as PrefixBlock;
      continue;
    }
    // A twin at another offset than the chain's moved in the body (Claude Code's tools and system, after its
    // messages): its offset is the record's own, so no other record has its block to share (a lookup per
    // moved block per record filled the shared blocks with keys never asked for again: 2.9 s of LRU upkeep
    // over 100,000 requests). A twin at the same offset is another conversation's object: it is shared.
    const moved = twin && (prior[i] as CapturedBlock).at !== b.at;
    const shareable = b.level !== 'messages' && reuse !== undefined && !moved;
    const key = shareable ? sharedKey(b, i, cumulative) : '';
    const known = shareable ? reuse.shared(key) : undefined;
    if (known) rest[i - first] = known;
    else {
      // Every block gets every field, in one order: one object shape (a shape per block fills the live
      // analysis with hidden classes).
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
        transcript: twin
          ? (before[i] as PrefixBlock).transcript
          : b.level === 'messages'
            ? transcript.next(b.role, b.id)
            : undefined,
      };
      if (shareable) reuse.share(key, block);
      rest[i - first] = block;
    }
    // A twin's transcript state is the chain's, already in `states`.
    if (!twin) states.push(transcript.save());
  }
  // One array of the final length (a slice then pushes left a half-empty tail on every record).
  const n = captured.blocks.length;
  let blocks: PrefixBlock[];
  if (first === 0) blocks = rest;
  else if (before.length >= n) {
    blocks = before.slice(0, n);
    for (let i = first; i < n; i++) blocks[i] = rest[i - first] as PrefixBlock;
  } else blocks = (before.length === first ? before : before.slice(0, first)).concat(rest);
  const known = taken?.levels;
  const runs = LEVELS.map((level) => levelRun(blocks, level, known?.[level], first));
  const levels = {} as Record<PrefixLevel, Prefix['levels'][PrefixLevel]>;
  LEVELS.forEach((level, l) => {
    let [start, end] = runs[l] as [number, number];
    if (start < 0) {
      // An empty level sits where the next level starts.
      start = runs.slice(l + 1).find(([s]) => s >= 0)?.[0] ?? blocks.length;
      end = start;
    }
    // Captures from before fold hashes were kept: the level's parameters stand in (same level, same params).
    const foldHash = captured.folds?.[level] ?? `${level}:${JSON.stringify(captured.params?.[level] ?? {})}`;
    // The chain's own string where it is the same (an interned one: no lookup).
    const chained = known?.[level].foldHash;
    levels[level] = {
      start,
      end,
      params: captured.params?.[level] ?? {},
      foldHash: chained === foldHash ? chained : reuse ? reuse.intern(foldHash) : foldHash,
    };
  });
  reuse?.keep(captured.blocks, blocks, states, { chain: taken?.chain, shared: from }, levels);
  const makeBody = () =>
    ({
      format: captured.format as WireFormat,
      bytes: Buffer.alloc(0),
      units: [],
      fields: {},
      fieldSpans: new Map(),
      betas: [...betas],
      value: () => ({}),
    }) as unknown as RequestBody;
  const body = reuse ? reuse.body(captured.format, betas, makeBody) : makeBody();
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

/**
 * Where `level`'s first run of blocks is: its first block and the end of the run ([-1, -1]: none). The first
 * `shared` blocks are the very objects of the prefix whose levels are `known` (if any): what that prefix's
 * run says of them holds, and only the blocks after them are looked at.
 */
function levelRun(
  blocks: readonly PrefixBlock[],
  level: PrefixLevel,
  known: Prefix['levels'][PrefixLevel] | undefined,
  shared: number,
): [number, number] {
  let start = -1;
  let end: number;
  // A known level with blocks begins at its first one; an empty one has none among the shared blocks.
  if (known && known.end > known.start && known.start < shared) {
    start = known.start;
    if (known.end < shared) return [start, known.end];
    end = shared;
  } else {
    for (let i = known ? shared : 0; i < blocks.length && start < 0; i++)
      if ((blocks[i] as PrefixBlock).level === level) start = i;
    if (start < 0) return [-1, -1];
    end = start;
  }
  while (end < blocks.length && blocks[end]?.level === level) end++;
  return [start, end];
}

const NO_CAPTURED: readonly CapturedBlock[] = [];

/**
 * Whether two captured blocks with the same cumulative key (the same content up to them) make the same
 * block: at the same offset, of the same size and with the same cache marker. Records captured apart (the
 * live analysis: each exchange's blocks are objects of its own) so share their conversation's blocks.
 */
function sameCaptured(a: CapturedBlock, b: CapturedBlock): boolean {
  return (
    a.at === b.at &&
    a.size === b.size &&
    a.id === b.id &&
    a.cc?.type === b.cc?.type &&
    a.cc?.ttl === b.cc?.ttl &&
    a.empty === b.empty
  );
}

/**
 * A chain no list holds any more lets go of its arrays: the record it was built for may still hold the
 * chain (to let it go when it is forgotten), and must not keep its blocks and states alive with it.
 */
function letGo(chain: CapturedChain): void {
  chain.captured = NO_CAPTURED;
  chain.blocks = [];
  chain.states = [];
  chain.ends = undefined;
  chain.levels = undefined;
}

/** Chains kept per first block: as many interleaved conversations as the proxy's prefix builder keeps. */
const MAX_CHAINS = 64;
/**
 * First blocks (distinct tool lists, or first messages when there are none) chains are kept for, least
 * recently used out first. As many as the capture writer keeps sessions' bases (256): what kept a chain
 * alive when chains were held by their first block's object (a record of it still held somewhere).
 */
const MAX_FIRST_BLOCKS = 256;

/**
 * How many leading blocks two lists share by cumulative key (the same content up to each). A key names
 * everything before it, so the shared ones form a prefix: binary search.
 */
export function sharedKeys(a: readonly CapturedBlock[], b: readonly CapturedBlock[]): number {
  let lo = 0;
  let hi = Math.min(a.length, b.length);
  while (lo < hi) {
    const mid = (lo + hi + 1) >>> 1;
    if (a[mid - 1]?.hash === b[mid - 1]?.hash) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}
