// The analyzer: reads capture records in order, asks the conversation model which conversation each
// request belongs to, runs the cache models for their evidence beside the provider's usage, and names one
// cause per re-written prefix with the cause table. Memory is bounded whatever the length of the capture;
// it never parses a body or guesses a lineage, a TTL or a cause of its own (the models answer those).

import { AnthropicCache } from '../cache/anthropic-cache.js';
import { TTL_1H } from '../cache/anthropic-rules.js';
import type { CacheEvidence, Unreadable } from '../cache/cache-evidence.js';
import { EntryStore } from '../cache/entry-store.js';
import { longestCacheTtlMs } from '../cache/longest-ttl.js';
import { OpenAICache } from '../cache/openai-cache.js';
import { openaiDefaultRetention } from '../cache/openai-rules.js';
import { MemoryConversationStore, type Relation } from '../conversation/conversation-store.js';
import { lastMessageKey, lazyAnchors } from '../conversation/reply-keys.js';
import {
  commitConversationSteps,
  type Reclassified,
  resolveConversationSteps,
} from '../conversation/resolve-conversation.js';
import { LruMap } from '../core/lru-map.js';
import { drainSteps } from '../core/steps.js';
import { fixChanged, NOT_FIXES } from '../fixes/fix-note.js';
import type { Prefix, PrefixBlock } from '../prefix/build-prefix.js';
import { type Divergence, firstDivergence, type PrefixChange } from '../prefix/first-divergence.js';
import { type CapturedPrefix, type CaptureRecord, UNRECORDED_KIND } from '../record/capture-record.js';
import { type NormalizedUsage, normalizeAnthropicUsage, normalizeOpenAIUsage } from '../wire/usage.js';
import {
  canTakeOver,
  type LineMember,
  lineOf,
  memberBlocks,
  type SharedRange,
  sharedRange,
  takeOver,
} from './block-line.js';
import { type CapturedChain, CapturedPrefixReuse, prefixFromCaptureSteps } from './captured-prefix.js';
import {
  type BustCause,
  type CauseDecision,
  decideCause,
  isStructural,
  structuralCause,
} from './cause-table.js';
import { costOf, type RequestCost, wasteOf } from './cost.js';
import type { PriceTable } from './price-table.js';
import type { UnrecordedBreak } from './unrecorded-break.js';
import { type Waiting, WaitingBlocks } from './waiting-blocks.js';

export type { BustCause } from './cause-table.js';

/** One request whose cached prefix was written again (or never read), with its cause and price. */
export interface Miss {
  requestId: string;
  /** Position of the request in its conversation (1-based turn). */
  turn: number;
  /** The session label (or the conversation, for requests without one). */
  session: string;
  conversation: string;
  time: number;
  model: string | undefined;
  cause: BustCause;
  detail: MissDetail;
  /** Tokens (as the provider counts them) that had been cached before and were written or processed again. */
  rewrittenTokens: number;
  /** What those tokens cost beyond reading them; null when the model has no price. */
  waste: number | null;
  /** The request this one was compared with. */
  parentId?: string;
  /** The provider's own diagnostics, and whether they agree with this cause. */
  providerDiagnosis?: { reason: string; agrees: boolean };
  sentence: string;
}

export interface MissDetail {
  /** What changed, from the prefix model's first divergence (the same as `cacheward diff`). */
  change?: PrefixChange;
  /** Every part that changed, the cause's own first. */
  changed?: Divergence['changed'];
  byteOffset?: number;
  blockIndex?: number;
  idleSeconds?: number;
  /** The TTL of the entry that expired (its own, per breakpoint). */
  ttlSeconds?: number;
  prefixTokens?: number;
  minimumTokens?: number;
  lookbackDistance?: number;
  forkOf?: string;
  expectedReadTokens?: number;
  actualReadTokens?: number;
  /** The cache model's evidence for the cause, as it gave it. */
  evidence?: Unreadable;
  /** A conversation's first request that read another session's cache: which session and request. */
  warmFrom?: WarmFrom;
  /**
   * An `unexplained` miss of a request whose source did not record all of it (an agent transcript with
   * messages and usage only): the parts not recorded, where the read ended (provider tokens, and whether
   * inside those parts), and the causes that fit there and could not be told apart.
   */
  unrecorded?: UnrecordedBreak & { readTokens: number };
}

/** Another session (label) whose cached prefix a conversation's first request read. */
export interface WarmFrom {
  session: string;
  request: string;
}

/** One analyzed request. */
export interface AnalyzedRequest {
  id: string;
  session: string;
  conversation: string;
  /** How it relates to earlier requests (count_tokens calls and refused requests are `none`). */
  relation: Relation | 'none';
  turn: number;
  /** The request it was compared with (its parent in the conversation model), if any. */
  parent?: string;
  time: number;
  provider: string;
  model: string | undefined;
  status: number | undefined;
  usage: NormalizedUsage | undefined;
  cost: RequestCost | null;
  /** What the cache model says the request should have read (in provider tokens, scaled from estimates). */
  expectedRead: number | undefined;
  /**
   * What the request left cached (provider tokens): the reported read and write, or, where the provider
   * reports no writes (OpenAI before GPT-5.6), what the cache model says automatic caching stored.
   */
  cachedAfter?: number;
  miss?: Miss;
  fork?: { parent: string };
  /** Its model has no price row of its own: the row it was priced from (its family's nearest). */
  pricedAs?: string;
  /** It started a conversation by reading another session's cache (never a fork of it: labels differ). */
  warmFrom?: WarmFrom;
  concurrent: boolean;
  /** It went out as the client sent it, unfixed, because the proxy's shared state could not be had (Redis). */
  unfixed?: true;
}

/** What the requests that went out unfixed because the shared state could not be had cost: their own misses. */
export interface UnfixedCost {
  requests: number;
  /** Tokens they re-wrote (a fixed conversation's kept prefix, busted), and what that cost beyond a read. */
  rewrittenTokens: number;
  waste: number;
}

/** Distinct notes of fixes that left requests as sent that a report keeps (a few per fix and model). */
const MAX_FIX_NOTES = 200;

/**
 * Outcomes of an exchange whose answer did not arrive whole (the proxy's words, capture-record.ts): the
 * client left, the upstream broke off or could not be reached, or the proxy could not send it (`refused`).
 */
const CUT_SHORT: ReadonlySet<string> = new Set([
  'client_aborted',
  'upstream_reset',
  'upstream_error',
  'refused',
]);

/**
 * How a request ended without its whole answer, or undefined when it got one (an error status is an
 * answer): its record's outcome, or `no_response` where a complete record holds neither a status nor usage
 * (a transcript's call that no response line followed).
 */
export function unansweredAs(r: Pick<CaptureRecord, 'outcome' | 'status' | 'usage'>): string | undefined {
  if (CUT_SHORT.has(r.outcome)) return r.outcome;
  if (r.outcome === 'complete' && r.status === undefined && !r.usage) return 'no_response';
  return undefined;
}

/** Whether a record went out unfixed because the shared state could not be had (its `state` note says so). */
export function wentOutUnfixed(r: Pick<CaptureRecord, 'fixes'>): boolean {
  return r.fixes.some(
    (f) => f.fix === 'state' && !f.changed && f.notes.some((n) => n.startsWith('skipped:')),
  );
}

export interface SessionSummary {
  session: string;
  requests: number;
  forks: number;
  concurrent: number;
  inputTokens: number;
  readTokens: number;
  writtenTokens: number;
  uncachedTokens: number;
  notReported: number;
  cost: number;
  waste: number;
  unpriced: number;
  first: number;
  last: number;
}

export interface AnalysisResult {
  version: 1;
  /** `notCaptured`: exchanges the proxy said it did not capture (set by the report's reader of the files). */
  generatedFrom: { records: number; files: number; skippedLines: number; notCaptured?: number };
  totals: {
    sessions: number;
    requests: number;
    inputTokens: number;
    readTokens: number;
    writtenTokens: number;
    uncachedTokens: number;
    outputTokens: number;
    /** Token-weighted: Σ read ÷ Σ input, over requests that reported cache fields. */
    hitRate: number | null;
    notReported: number;
    cost: number;
    waste: number;
    unpricedRequests: number;
    unpricedModels: string[];
    /** Requests that went out unfixed because a fleet's shared state could not be had, and their cost (if any). */
    unfixed?: UnfixedCost;
    /** Requests that got no whole answer, by how they ended (see {@link unansweredAs}), when any did. */
    unanswered?: Record<string, number>;
  };
  byCause: Array<{ cause: BustCause; misses: number; rewrittenTokens: number; waste: number }>;
  sessions: SessionSummary[];
  misses: Miss[];
  /** Per request, for charts (id, time, tokens, cause). Always present; the HTML draws from it. */
  requests: AnalyzedRequest[];
  prices: PriceUsed[];
  /**
   * Fixed requests the provider refused, by fix, when there were any: each went out as the client sent it
   * instead, and the fix was withdrawn for that conversation on that model.
   */
  fixRefusals?: Record<string, number>;
  /** Requests a fix changed (what went out was the fixed form), by fix, when a fix changed any. */
  fixesApplied?: Record<string, number>;
  /**
   * What fixes said of the requests they left as the client sent them (a model without the feature, a
   * refusal earlier in the conversation, a shape they do not touch), by fix and note, when a fix said any:
   * `said` is how many records carry the note (some are said once per conversation and model, some on
   * every request), most first.
   */
  fixesLeftAsSent?: Array<{ fix: string; note: string; said: number }>;
}

/**
 * A price the report used: the row's model, label, date and source; `pricedAs` when the model has no row
 * of its own and was priced from its family's nearest row (that row's model).
 */
export interface PriceUsed {
  model: string;
  label: string;
  date: string;
  source: string;
  pricedAs?: string;
}

export interface AnalyzeOptions {
  prices: PriceTable;
  /** What-if: every breakpoint's TTL set to this (ms) in the cache model. */
  ttlOverride?: number;
  /** Keep per-request rows in the result (default true; the summary does not need them). */
  keepRequests?: boolean;
  /** The OpenAI organization has Zero Data Retention: requests without a retention get `in_memory`. */
  zdr?: boolean;
  /** Keep every miss for the result (default true; a live analysis hands each on and keeps none). */
  keepMisses?: boolean;
  /** Records allowed to arrive out of start order (the reorder window). Default 256. */
  window?: number;
  /** Bounds for an analysis that runs for ever (the proxy's live view); a report keeps everything. */
  bounds?: AnalyzerBounds;
}

/** What a long-running analyzer remembers at most (least recently used go first). */
export interface AnalyzerBounds {
  /** Conversations the conversation model remembers (and 4 requests, 16 transcript keys for each). */
  conversations: number;
  /** Recent requests kept as parents for the requests after them. */
  recent: number;
  /** Cache entries each provider's cache model keeps. */
  cacheEntries: number;
  /** Session summaries. */
  sessions: number;
}

/** What the analyzer keeps of a recent request, for the requests that come after it. Bounded. */
interface Seen extends LineMember<PrefixBlock> {
  id: string;
  session: string;
  conversation: string;
  model: string | undefined;
  start: number;
  firstByte: number;
  /** Estimated tokens of the prefix it had cached once done (reported, or inferred by the model). */
  cachedEst: number;
  /**
   * Its prefix. While it is its line's latest, `prefix.blocks` is its own array and `line.blocks`; once a
   * later request's blocks share most of them (the next turn: all but the block whose cache marker moved,
   * and on Claude Code's layout the tools and system, which moved), that request's array stands in: this
   * request's blocks are then its `head`, the line's up to `to`, and its `tail` (block-line), and its own
   * array goes (`prefix.blocks` is emptied). A conversation's recent requests so hold one array between
   * them, not one each (~2 KB per request at 200 turns, 160 KB at 10,000, each kept until 4,096 requests
   * later).
   */
  prefix: Prefix;
  /** The prefix reuse's chain its build kept: let go when it is forgotten (see CapturedPrefixReuse.release). */
  chain: CapturedChain | undefined;
  /** Its divergence from its own parent (to re-name its cause if its relation changes later). */
  divergence: Divergence | null;
  row: AnalyzedRequest;
}

const NO_BLOCKS: PrefixBlock[] = [];
const NOT_SHARED: SharedRange = { from: 0, to: 0 };

/**
 * The range `a` and `b` share as the very same objects, looked for only near the end of the shorter (a
 * next turn differs from its parent in the last block or two, if at all). A messages block is made for one
 * record and only ever copied into a later record's array with every block before it that is its base's
 * object (captured-prefix), so where the tools and system blocks are the same objects too, the same object
 * at one place means the same objects before it; tools and system blocks are shared across conversations,
 * so a match among them is checked whole (a few blocks). Where one of them differs (Claude Code's tools and
 * system, which moved in the body; or a system prompt sent after the messages), the range is counted one
 * by one.
 */
function sharedBlocks(a: readonly PrefixBlock[], b: readonly PrefixBlock[]): SharedRange {
  const k = Math.min(a.length, b.length);
  for (let i = k - 1; i >= 0 && i >= k - 16; i--) {
    const x = a[i] as PrefixBlock;
    if (x !== b[i]) continue;
    // Tools or system blocks of their own (moved in the body): counted one by one. (Where `x` is one of
    // them, every block before it is too, so this checks the match whole.)
    for (let j = 0; j < i && (a[j] as PrefixBlock).level !== 'messages'; j++)
      if (a[j] !== b[j]) return sharedRange(a, b);
    return { from: 0, to: i + 1 };
  }
  return NOT_SHARED;
}

/** Whether two blocks are equal in every field a block has (the same content at the same place). */
function sameBlock(a: PrefixBlock, b: PrefixBlock): boolean {
  return (
    a.hash === b.hash &&
    a.index === b.index &&
    a.contentHash === b.contentHash &&
    a.span.start === b.span.start &&
    a.span.end === b.span.end &&
    a.cumulativeTokens === b.cumulativeTokens &&
    a.transcript === b.transcript &&
    a.emptyText === b.emptyText &&
    a.cacheControl?.type === b.cacheControl?.type &&
    a.cacheControl?.ttl === b.cacheControl?.ttl
  );
}

/**
 * Puts `a`'s block in `b`'s place wherever the two are equal (see {@link sameBlock}), up to the first block
 * whose cumulative key differs (none after it can be equal); returns whether any was put in.
 */
function adoptEqualBlocks(a: readonly PrefixBlock[], b: PrefixBlock[]): boolean {
  const n = Math.min(a.length, b.length);
  let adopted = false;
  for (let i = 0; i < n; i++) {
    const x = a[i] as PrefixBlock;
    const y = b[i] as PrefixBlock;
    if (x === y) continue;
    if (x.hash !== y.hash) break;
    if (sameBlock(x, y)) {
      b[i] = x;
      adopted = true;
    }
  }
  return adopted;
}

/** A recent request's prefix, whole (its blocks put together again when a later request's array holds them). */
function prefixOf(seen: Seen): Prefix {
  const line = seen.line.blocks;
  if (seen.prefix.blocks === line) return seen.prefix;
  const whole = seen.head.length === 0 && seen.tail.length === 0 && seen.to === line.length;
  return { ...seen.prefix, blocks: whole ? line : memberBlocks(seen) };
}

const RECENT = 4_096;
/**
 * Prefix blocks the recent requests may hold between them: a 10,000-turn session's prefixes have 20,000
 * blocks each, and 4,096 of them would pin 80 million references. Parents are recent: fewer are kept then.
 */
const RECENT_BLOCKS = 2_000_000;
/**
 * Expired cache entries a report remembers, to name `ttl_expired`. A cause is only named against a recent
 * parent ({@link RECENT}), and what expired after that parent's entry did was alive when the parent began or
 * written since: this covers four breakpoints for each of the recent requests, and as many again alive
 * before them. (The store's default, 100,000, was 20 MB at 100,000 requests, for parents long forgotten.)
 */
const REPORT_EXPIRED = 2 * 4 * RECENT;
/**
 * A report's conversation model: bounded too, so 100,000 requests do not hold every request's node. It
 * remembers the 20,480 requests used last (five times the recent parents a cause is named against) and as
 * many transcript keys as five each. A conversation idle while more than that passed starts again as a new
 * one, and its cause is `cold_start` either way (its parent left the recent ones long before); a fork from
 * a turn that many requests old is a new conversation too (`cold_start` where `fork_diverged` was named
 * against the line's tip). (50,000 requests and 250,000 keys were 62 MB of a report's 100,000 requests.)
 */
const REPORT_STORE = { maxRequests: 5 * RECENT, maxKeys: 25 * RECENT };
/** A bounded (live) analysis's conversation model keeps this many requests of each conversation. */
const REQUESTS_PER_CONVERSATION = 4;

/** The analysis over a stream of records. */
export async function analyzeRecords(
  records: AsyncIterable<CaptureRecord>,
  options: AnalyzeOptions,
): Promise<AnalysisResult> {
  const window = options.window ?? 256;
  // Kept in start order as records come (a stable insertion: equal starts keep their arrival order), the
  // earliest analyzed once more than `window` wait: a sort of the whole window per record cost a copy of it.
  const pending: Waiting[] = [];
  // While they wait, a conversation's records share one block array (a record's prefix blocks may be
  // replaced by an equal array: the records are the analysis's once given).
  const waiting = new WaitingBlocks();
  const analyzer = new Analyzer(options);
  let count = 0;
  for await (const r of records) {
    count++;
    const start = r.times.start;
    // In order (the usual case): after every waiting record, found without a search.
    const last = pending[pending.length - 1];
    let lo = last === undefined || last.record.times.start <= start ? pending.length : 0;
    let hi = pending.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((pending[mid] as Waiting).record.times.start <= start) lo = mid + 1;
      else hi = mid;
    }
    const w = waiting.arrive(r);
    if (lo === pending.length) pending.push(w);
    else pending.splice(lo, 0, w);
    if (pending.length > window) analyzer.add(waiting.leave(pending.shift() as Waiting));
  }
  for (const w of pending) analyzer.add(waiting.leave(w));
  return analyzer.result(count);
}

/** The session label of a record: a label the client sent, else none. */
function labelOf(r: CaptureRecord): string | undefined {
  const source = r.session.source;
  return source === 'lineage' || source === 'conversation' || source === 'none' ? undefined : r.session.key;
}

/**
 * A count_tokens call or a request the upstream refused: recorded, a turn of nobody. Refused is its status
 * (>= 400) or, where the status is not known (a transcript that records the error but not its status), its
 * outcome `error`.
 */
export function isTurn(r: Pick<CaptureRecord, 'route' | 'status' | 'outcome'>): boolean {
  if (r.route.includes('count_tokens')) return false;
  if (r.outcome === 'error') return false;
  return r.status === undefined || r.status < 400;
}

export class Analyzer {
  private readonly anthropic: AnthropicCache;
  private readonly openai: OpenAICache;
  private readonly conversations: MemoryConversationStore;
  private readonly maxRecent: number;
  private recentBlocks = 0;
  /** Prefix blocks shared between records that share captured blocks (the reader's delta bases). */
  private readonly reuse = new CapturedPrefixReuse();
  /**
   * Recent requests, oldest first (in the order remembered: read with `peek`, which keeps it). An LruMap, not
   * a Map: the oldest of a Map is found by walking over the hole each delete at its front left.
   */
  private readonly recent = new LruMap<Seen>(Number.POSITIVE_INFINITY);
  private readonly sessions = new Map<string, SessionSummary>();
  private readonly requests: AnalyzedRequest[] = [];
  private readonly misses: Miss[] = [];
  private readonly unpricedModels = new Set<string>();
  private readonly pricesUsed = new Map<string, PriceUsed>();
  private outputTokens = 0;
  /** Requests whose fixed form the provider refused, by fix (their notes say so). */
  private readonly fixRefusals = new Map<string, number>();
  private readonly fixesApplied = new Map<string, number>();
  private readonly leftAsSent = new Map<string, { fix: string; note: string; said: number }>();
  private readonly unanswered = new Map<string, number>();
  private readonly unfixed: UnfixedCost = { requests: 0, rewrittenTokens: 0, waste: 0 };

  constructor(private readonly options: AnalyzeOptions) {
    const b = options.bounds;
    const store = () => new EntryStore(b ? { maxEntries: b.cacheEntries } : { maxExpired: REPORT_EXPIRED });
    this.anthropic = new AnthropicCache({ store: store() });
    this.openai = new OpenAICache({ store: store() });
    this.conversations = new MemoryConversationStore(
      b
        ? {
            maxConversations: b.conversations,
            maxRequests: b.conversations * 4,
            maxKeys: b.conversations * 16,
            maxRequestsPerConversation: REQUESTS_PER_CONVERSATION,
          }
        : REPORT_STORE,
    );
    this.maxRecent = b?.recent ?? RECENT;
  }

  /** Analyzes one record (records should arrive in start order) and returns its row. */
  add(r: CaptureRecord): AnalyzedRequest | undefined {
    return drainSteps(this.addSteps(r));
  }

  /**
   * Whether the conversation model still holds this request, so a later request can continue it. A bounded
   * analysis forgets a conversation its provider's cache can no longer hold, and any past its bounds: a
   * reader that can give the history again (`cacheward watch`) asks before handing on a later call.
   */
  remembers(id: string): boolean {
    return this.conversations.holds(id);
  }

  /** Counts a fix's notes on a request it left as sent (at most {@link MAX_FIX_NOTES} distinct ones). */
  private noteLeftAsSent(fix: string, notes: readonly string[]): void {
    for (const note of notes) {
      const key = `${fix}\n${note}`;
      const known = this.leftAsSent.get(key);
      if (known) known.said++;
      else if (this.leftAsSent.size < MAX_FIX_NOTES) this.leftAsSent.set(key, { fix, note, said: 1 });
    }
  }

  /**
   * {@link add} in bounded steps: the prefix, its message ends and the conversation's resolution and commit
   * yield every few hundred items (a 100,000-message record is analyzed over many slices). The same row;
   * no other record may be added until the steps are done.
   */
  *addSteps(r: CaptureRecord): Generator<void, AnalyzedRequest | undefined> {
    for (const f of r.fixes ?? []) {
      if (f.refused) this.fixRefusals.set(f.fix, (this.fixRefusals.get(f.fix) ?? 0) + 1);
      // Went out in the fixed form and the provider answered that (a status, not a refusal of the fix).
      if (fixChanged(f) && !f.refused && r.status !== undefined)
        this.fixesApplied.set(f.fix, (this.fixesApplied.get(f.fix) ?? 0) + 1);
      else if (!f.changed && !NOT_FIXES.has(f.fix)) this.noteLeftAsSent(f.fix, f.notes);
    }
    if (!r.prefix || r.method !== 'POST') return undefined;
    const usage =
      r.usage?.normalized ??
      (r.usage
        ? r.provider === 'anthropic'
          ? normalizeAnthropicUsage(r.usage.raw)
          : normalizeOpenAIUsage(r.usage.raw)
        : undefined);
    const start = r.times.start;
    const firstByte = r.times.firstByte ?? r.times.end ?? start;
    const captured = this.withTtl(r.prefix);
    const model = r.model === undefined ? undefined : this.reuse.intern(r.model);
    const prefix = yield* prefixFromCaptureSteps(captured, model, r.betas, this.reuse);
    // Provider tokens per estimated token, over what the model saw (thinking an older model stripped is
    // not input: scaled against the prefix as sent, every figure would shrink by it).
    const scaleOver = (seen: Prefix) =>
      usage && usage.inputTotal > 0 ? usage.inputTotal / Math.max(1, seen.totalTokens) : 1;
    let scale = scaleOver(prefix);
    const labelled = labelOf(r);
    const label = labelled === undefined ? undefined : this.reuse.intern(labelled);
    const turnOf = isTurn(r);

    // Which conversation: the one resolver, on the captured prefix (a chained Responses request's is the
    // whole chain, and its previous_response_id links it to the request that got that response).
    const chained = r.chain?.previous ?? r.prefix.params.messages?.previous_response_id;
    const previous = typeof chained === 'string' ? chained : undefined;
    const ends = yield* this.reuse.messageEndsSteps(captured.blocks, prefix);
    const last = lastMessageKey(prefix, ends);
    const req = {
      id: r.id,
      time: start,
      ends,
      head: prefix.levels.messages.foldHash,
      anchors: lazyAnchors(prefix, ends),
      ...(last !== undefined ? { last } : {}),
      ...(label !== undefined ? { label } : {}),
      ...(model !== undefined ? { model } : {}),
      ...(previous !== undefined ? { previous } : {}),
    };
    const res = turnOf ? yield* resolveConversationSteps(this.conversations, req) : undefined;
    if (res) {
      // A bounded (live) analysis also forgets a conversation once its provider's cache cannot hold it.
      if (this.options.bounds)
        this.conversations.stamp(
          start + longestCacheTtlMs(r.provider === 'anthropic' ? 'anthropic-messages' : undefined),
        );
      yield* commitConversationSteps(this.conversations, req, res);
      if (res && r.responseId) this.conversations.addResponse(r.responseId, r.id);
      if (this.options.bounds) this.conversations.prune(start);
    }
    const parent = res?.parent ? this.recent.peek(res.parent) : undefined;
    const conversation = res?.conversation ?? `none-${r.id}`;
    const session = label ?? (res?.relation === 'fork' && parent ? parent.session : conversation);

    // The cache model, on the captured prefix, at the captured times: usage and evidence.
    let evidence: CacheEvidence | undefined;
    if (turnOf && r.provider === 'anthropic') {
      const out = yield* this.anthropic.evaluateSteps(prefix, 'capture', start, r.id, { explain: true });
      if ('usage' in out) {
        evidence = out.evidence;
        if (out.thinkingStripped) scale = scaleOver(out.thinkingStripped.prefix);
        this.anthropic.responseBegan(out, firstByte);
      }
    } else if (turnOf && r.provider === 'openai') {
      // A request that names no retention gets the provider's default (24h, or in_memory under ZDR).
      const retention =
        r.cacheOptions?.retention ?? openaiDefaultRetention(model, { zdr: this.options.zdr ?? false });
      const out = this.openai.evaluate(prefix, 'capture', start, r.id, {
        retention,
        ...(r.cacheOptions?.mode ? { mode: r.cacheOptions.mode } : {}),
        explain: true,
      });
      evidence = out.evidence;
      this.openai.responseBegan(out, firstByte);
    }

    const row: AnalyzedRequest = {
      id: r.id,
      session,
      conversation,
      relation: res?.relation ?? 'none',
      turn: res?.turn ?? 0,
      time: start,
      provider: r.provider,
      model,
      status: r.status,
      usage,
      cost: null,
      expectedRead: evidence ? Math.round(evidence.readTokens * scale) : undefined,
      concurrent: !!parent && start < parent.firstByte,
    };
    if (res?.parent) row.parent = res.parent;
    const price = this.options.prices.lookup(model);
    if (usage) {
      row.cost = price ? costOf(usage, price) : null;
      if (price) {
        const own = price.nearestFor === undefined;
        this.pricesUsed.set(own ? price.model : (price.nearestFor as string), {
          model: own ? price.model : (price.nearestFor as string),
          label: price.label,
          date: price.date,
          source: price.source,
          ...(own ? {} : { pricedAs: price.model }),
        });
        if (!own) row.pricedAs = price.model;
      } else if (model) this.unpricedModels.add(model);
      this.outputTokens += usage.output;
    }
    if (res?.relation === 'fork' && res.parent) row.fork = { parent: res.parent };
    // Another label's history shared, and the provider read from its cache: it started warm from it.
    if (res?.warm && usage && usage.cacheRead > 0)
      row.warmFrom = { session: res.warm.label, request: res.warm.request };
    // A step of its own: it compares every shared block of a long history.
    if (parent) yield;
    const divergence = parent ? firstDivergence(prefixOf(parent), prefix) : null;
    if (usage?.cacheReported && turnOf) {
      const decision = decideCause({
        relation: res?.relation ?? 'new',
        hasParent: !!parent,
        parentCached: parent?.cachedEst ?? 0,
        divergence,
        shared: divergence
          ? divergence.sharedTokens
          : Math.min(parent?.prefix.totalTokens ?? 0, prefix.totalTokens),
        read: usage.cacheRead / scale,
        written: usage.cacheWrite / scale,
        total: prefix.totalTokens,
        evidence,
        beforeParentResponse: row.concurrent,
        idleSeconds: parent ? (start - parent.start) / 1000 : 0,
        ...unrecordedOf(r.prefix, prefix),
      });
      if (decision) {
        const miss = this.makeMiss(r, row, usage, scale, decision, parent, prefix);
        row.miss = miss;
        if (this.options.keepMisses !== false) this.misses.push(miss);
      }
    }
    if (wentOutUnfixed(r)) {
      row.unfixed = true;
      this.unfixed.requests++;
      this.unfixed.rewrittenTokens += row.miss?.rewrittenTokens ?? 0;
      this.unfixed.waste += row.miss?.waste ?? 0;
    }
    for (const c of res?.reclassified ?? []) this.reclassify(c);
    const ended = unansweredAs(r);
    if (ended) this.unanswered.set(ended, (this.unanswered.get(ended) ?? 0) + 1);
    this.tally(row, usage);
    if (this.options.keepRequests !== false) this.requests.push(row);

    if (turnOf) {
      // What this request leaves cached: the provider's word where it reports writes, else the model's.
      const reported = usage?.cacheReported ? (usage.cacheRead + usage.cacheWrite) / scale : 0;
      const inferred = evidence && !evidence.writesReported ? evidence.cachedAfterTokens : 0;
      row.cachedAfter = Math.round(Math.max(reported, inferred) * scale);
      this.remember(
        {
          id: r.id,
          session,
          conversation,
          model,
          start,
          firstByte,
          cachedEst: Math.max(reported, inferred),
          prefix,
          line: lineOf(prefix.blocks),
          head: NO_BLOCKS,
          to: prefix.blocks.length,
          tail: NO_BLOCKS,
          chain: this.reuse.chainOf(captured.blocks, prefix),
          divergence,
          row,
        },
        parent,
      );
    }
    // A record that is no turn (an error, a count_tokens call) is nobody's parent, but keeps the chain it
    // took over from its conversation: the retry or the next turn takes it over in turn.
    return row;
  }

  /**
   * Keeps `seen` for the requests after it. Its blocks take over its parent's line when they begin with
   * enough of that line's (the usual next turn), else they start a line of their own. `recentBlocks`
   * counts each line's array once, and the tails.
   */
  private remember(seen: Seen, parent: Seen | undefined): void {
    const before = this.recent.peek(seen.id);
    if (before) {
      this.recent.delete(seen.id);
      this.leave(before);
    }
    const line = parent && this.recent.peek(parent.id) === parent ? parent.line : undefined;
    const blocks = seen.prefix.blocks;
    let range = line ? sharedBlocks(line.blocks, blocks) : NOT_SHARED;
    // Records built apart (the live analysis: each exchange's blocks are its own objects) share no objects
    // with their parent: its equal blocks stand in for theirs, so the conversation's records hold one array.
    if (line && !canTakeOver(line, range) && adoptEqualBlocks(line.blocks, blocks))
      range = sharedBlocks(line.blocks, blocks);
    if (line && canTakeOver(line, range)) {
      const before = line.blocks.length;
      // The former latest keeps what the new array shares with it, and its own first and last blocks.
      const { member, head, tail } = takeOver(line, blocks, range);
      if (member) {
        (member as Seen).prefix.blocks = NO_BLOCKS;
        this.recentBlocks += head.length + tail.length;
      }
      this.recentBlocks += blocks.length - before;
      seen.line = line;
    } else this.recentBlocks += blocks.length;
    seen.line.latest = seen;
    seen.line.members++;
    this.recent.set(seen.id, seen);
    // A bounded analysis keeps what follows its conversations, not its traffic: a request that continues
    // its parent's line takes its place (a fork, a retry or a sibling keeps the parent it came from).
    if (
      this.options.bounds &&
      parent &&
      seen.row.relation === 'continues' &&
      parent.conversation === seen.conversation &&
      this.recent.peek(parent.id) === parent
    ) {
      this.recent.delete(parent.id);
      this.leave(parent);
    }
    while (this.recent.size > this.maxRecent || (this.recentBlocks > RECENT_BLOCKS && this.recent.size > 1)) {
      const oldest = this.recent.first()?.[1];
      if (oldest === undefined) break;
      this.recent.delete(oldest.id);
      this.leave(oldest);
    }
  }

  /** A request leaves the recent ones: its tail, and its line's array once nobody is on it, go. */
  private leave(seen: Seen): void {
    if (seen.chain) this.reuse.release(seen.chain);
    const line = seen.line;
    this.recentBlocks -= seen.head.length + seen.tail.length;
    if (line.latest === seen) line.latest = undefined;
    if (--line.members === 0) this.recentBlocks -= line.blocks.length;
  }

  /**
   * A later request showed that an earlier one was a fork (or the main line after all): re-name it, and
   * place it in its conversation (a fork is the first turn of its own; the main line's turn follows its
   * parent's).
   */
  private reclassify(c: Reclassified): void {
    const seen = this.recent.peek(c.request);
    if (!seen) return;
    const { relation } = c;
    const row = seen.row;
    const summary = this.sessions.get(row.session);
    const wasFork = !!row.fork;
    row.relation = relation;
    const parentId = row.miss?.parentId ?? this.conversations.request(c.request)?.parent;
    if (relation === 'fork' && parentId) row.fork = { parent: parentId };
    else delete row.fork;
    if (summary && wasFork !== !!row.fork) summary.forks += row.fork ? 1 : -1;
    const parentRow = parentId ? this.recent.peek(parentId)?.row : undefined;
    row.conversation = c.conversation;
    seen.conversation = c.conversation;
    if (relation === 'fork') row.turn = 1;
    else if (parentRow) row.turn = parentRow.turn + 1;
    const miss = row.miss;
    if (!miss) return;
    miss.turn = row.turn;
    miss.conversation = row.conversation;
    if (relation === 'fork' && isStructural(miss.cause)) {
      miss.cause = 'fork_diverged';
      if (parentId) miss.detail.forkOf = parentId;
    } else if (relation !== 'fork' && miss.cause === 'fork_diverged' && seen.divergence) {
      miss.cause = structuralCause(seen.divergence);
      delete miss.detail.forkOf;
    }
  }

  private makeMiss(
    r: CaptureRecord,
    row: AnalyzedRequest,
    usage: NormalizedUsage,
    scale: number,
    d: CauseDecision,
    parent: Seen | undefined,
    prefix: Prefix,
  ): Miss {
    const price = this.options.prices.lookup(row.model);
    const rewrittenTokens = Math.max(0, Math.round(d.rewritten * scale));
    const oneHour = r.prefix?.blocks.some((b) => b.cc?.ttl === '1h') ?? false;
    const detail: MissDetail = {};
    if (d.change) detail.change = d.change;
    if (d.changed) detail.changed = d.changed;
    if (d.blockIndex !== undefined) {
      detail.blockIndex = d.blockIndex;
      const at = prefix.blocks[d.blockIndex]?.span.start;
      if (at !== undefined) detail.byteOffset = at;
    }
    if (d.evidence) detail.evidence = d.evidence;
    if (d.unrecorded) detail.unrecorded = { ...d.unrecorded, readTokens: usage.cacheRead };
    if (parent) {
      const idle = (r.times.start - parent.start) / 1000;
      // Sub-second gaps matter for concurrency; for everything else whole seconds say it.
      detail.idleSeconds = d.cause === 'concurrent' ? Math.round(idle * 10) / 10 : Math.round(idle);
    }
    if (d.cause === 'fork_diverged' && parent) detail.forkOf = parent.id;
    if (row.warmFrom) detail.warmFrom = row.warmFrom;
    if (d.evidence?.reason === 'expired') detail.ttlSeconds = d.evidence.ttlMs / 1000;
    if (d.evidence?.reason === 'beyond_lookback' && d.evidence.distance)
      detail.lookbackDistance = d.evidence.distance;
    if (d.cause === 'below_minimum' && d.evidence?.reason === 'below_minimum') {
      detail.prefixTokens = Math.round(prefix.totalTokens * scale);
      detail.minimumTokens = d.evidence.minimum;
    }
    if (d.cause === 'unexplained') {
      detail.expectedReadTokens = row.expectedRead ?? 0;
      detail.actualReadTokens = usage.cacheRead;
    }
    const miss: Miss = {
      requestId: r.id,
      turn: row.turn,
      session: row.session,
      conversation: row.conversation,
      time: row.time,
      model: row.model,
      cause: d.cause,
      detail,
      rewrittenTokens,
      waste: price ? wasteOf(rewrittenTokens, price, r.provider, oneHour, usage) : null,
      sentence: '',
    };
    if (parent) miss.parentId = parent.id;
    const diag = providerDiagnosis(r, d.cause);
    if (diag) miss.providerDiagnosis = diag;
    return miss;
  }

  private withTtl(prefix: CapturedPrefix): CapturedPrefix {
    const ttl = this.options.ttlOverride;
    if (ttl === undefined) return prefix;
    const t = ttl >= TTL_1H ? '1h' : '5m';
    return {
      ...prefix,
      blocks: prefix.blocks.map((b) => (b.cc ? { ...b, cc: { ...b.cc, ttl: t } } : b)),
      ...(prefix.auto ? { auto: { ...prefix.auto, ttl: t } } : {}),
    };
  }

  private tally(row: AnalyzedRequest, usage: NormalizedUsage | undefined): void {
    let s = this.sessions.get(row.session);
    if (!s) {
      s = {
        session: row.session,
        requests: 0,
        forks: 0,
        concurrent: 0,
        inputTokens: 0,
        readTokens: 0,
        writtenTokens: 0,
        uncachedTokens: 0,
        notReported: 0,
        cost: 0,
        waste: 0,
        unpriced: 0,
        first: row.time,
        last: row.time,
      };
      this.sessions.set(row.session, s);
      const max = this.options.bounds?.sessions;
      if (max !== undefined && this.sessions.size > max) {
        const oldest = this.sessions.keys().next().value;
        if (oldest !== undefined) this.sessions.delete(oldest);
      }
    }
    s.requests++;
    if (row.fork) s.forks++;
    if (row.concurrent) s.concurrent++;
    s.last = Math.max(s.last, row.time);
    if (usage) {
      if (usage.cacheReported) {
        s.inputTokens += usage.inputTotal;
        s.readTokens += usage.cacheRead;
        s.writtenTokens += usage.cacheWrite;
        s.uncachedTokens += usage.uncached;
      } else s.notReported++;
    }
    if (row.cost) s.cost += row.cost.total;
    else if (usage) s.unpriced++;
    if (row.miss?.waste) s.waste += row.miss.waste;
  }

  result(records: number): AnalysisResult {
    const sessions = [...this.sessions.values()].sort((a, b) => b.cost - a.cost || a.first - b.first);
    const totals = sessions.reduce(
      (t, s) => {
        t.inputTokens += s.inputTokens;
        t.readTokens += s.readTokens;
        t.writtenTokens += s.writtenTokens;
        t.uncachedTokens += s.uncachedTokens;
        t.notReported += s.notReported;
        t.cost += s.cost;
        t.waste += s.waste;
        t.unpricedRequests += s.unpriced;
        t.requests += s.requests;
        return t;
      },
      {
        inputTokens: 0,
        readTokens: 0,
        writtenTokens: 0,
        uncachedTokens: 0,
        notReported: 0,
        cost: 0,
        waste: 0,
        unpricedRequests: 0,
        requests: 0,
      },
    );
    const byCause = new Map<
      BustCause,
      { cause: BustCause; misses: number; rewrittenTokens: number; waste: number }
    >();
    for (const m of this.misses) {
      const c = byCause.get(m.cause) ?? { cause: m.cause, misses: 0, rewrittenTokens: 0, waste: 0 };
      c.misses++;
      c.rewrittenTokens += m.rewrittenTokens;
      c.waste += m.waste ?? 0;
      byCause.set(m.cause, c);
    }
    return {
      version: 1,
      generatedFrom: { records, files: 0, skippedLines: 0 },
      totals: {
        sessions: sessions.length,
        ...totals,
        outputTokens: this.outputTokens,
        hitRate: totals.inputTokens > 0 ? totals.readTokens / totals.inputTokens : null,
        unpricedModels: [...this.unpricedModels].sort(),
        ...(this.unfixed.requests ? { unfixed: { ...this.unfixed } } : {}),
        ...(this.unanswered.size ? { unanswered: Object.fromEntries(this.unanswered) } : {}),
      },
      byCause: [...byCause.values()].sort(
        (a, b) => b.waste - a.waste || b.rewrittenTokens - a.rewrittenTokens,
      ),
      sessions,
      misses: [...this.misses].sort(
        (a, b) => (b.waste ?? 0) - (a.waste ?? 0) || b.rewrittenTokens - a.rewrittenTokens,
      ),
      requests: this.requests,
      prices: [...this.pricesUsed.values()],
      ...(this.fixRefusals.size ? { fixRefusals: Object.fromEntries(this.fixRefusals) } : {}),
      ...(this.fixesApplied.size ? { fixesApplied: Object.fromEntries(this.fixesApplied) } : {}),
      ...(this.leftAsSent.size
        ? { fixesLeftAsSent: [...this.leftAsSent.values()].sort((a, b) => b.said - a.said) }
        : {}),
    };
  }
}

/** What a record's source did not record, and where the block standing for it ends in `prefix` (estimates). */
function unrecordedOf(
  captured: CapturedPrefix,
  prefix: Prefix,
): { unrecorded?: { parts: CapturedPrefix['unrecorded'] & object; tokens: number } } {
  if (!captured.unrecorded?.length) return {};
  let tokens = 0;
  for (const b of prefix.blocks) {
    if (b.kind === UNRECORDED_KIND) tokens = b.cumulativeTokens;
    else if (tokens > 0) break;
  }
  return { unrecorded: { parts: captured.unrecorded, tokens } };
}

/** The provider's own diagnostics on the response, and whether they agree with our cause. */
function providerDiagnosis(
  r: CaptureRecord,
  cause: BustCause,
): { reason: string; agrees: boolean } | undefined {
  const d = r.diagnostics as Record<string, unknown> | null | undefined;
  if (d === undefined) return undefined;
  let reason: string;
  if (r.provider === 'anthropic') {
    const m =
      d && typeof d === 'object' ? (d.cache_miss_reason as Record<string, unknown> | null | undefined) : null;
    reason = m && typeof m.type === 'string' ? m.type : 'none';
  } else {
    reason = d && typeof d === 'object' ? String(d.reason ?? d.type ?? 'none') : 'none';
  }
  const structural: Partial<Record<BustCause, string[]>> = {
    model_changed: ['model_changed'],
    system_changed: ['system_changed', 'input_changed'],
    tools_changed: ['tools_changed'],
    messages_edited: ['messages_changed', 'input_changed'],
    params_changed: [
      'unavailable',
      'text_format_changed',
      'reasoning_effort_changed',
      'verbosity_changed',
      'prompt_cache_key_changed',
    ],
    fork_diverged: [
      'tools_changed',
      'system_changed',
      'messages_changed',
      'model_changed',
      'unavailable',
      'input_changed',
    ],
  };
  const expected = structural[cause];
  const agrees = expected
    ? expected.includes(reason)
    : ['none', 'cache_hit', 'previous_message_not_found', 'unavailable'].includes(reason);
  return { reason, agrees };
}
