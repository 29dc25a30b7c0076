// The analyzer: reads capture records in order, finds each request's lineage, runs the cache model beside the
// provider's usage, names one cause per re-written prefix and prices it. Streaming: memory does not grow with the capture.

import { AnthropicCache } from '../cache/anthropic-cache.js';
import { TTL_1H, TTL_5M } from '../cache/anthropic-rules.js';
import { OpenAICache } from '../cache/openai-cache.js';
import type { CapturedPrefix, CaptureRecord } from '../capture/capture-record.js';
import { type NormalizedUsage, normalizeAnthropicUsage, normalizeOpenAIUsage } from '../wire/usage.js';
import { type CapturedChange, capturedDivergence } from './captured-divergence.js';
import { prefixFromCapture } from './captured-prefix.js';
import { costOf, type RequestCost, wasteOf } from './cost.js';
import type { PriceTable } from './price-table.js';

/** The closed vocabulary of bust causes (DESIGN.md). */
export type BustCause =
  | 'cold_start'
  | 'tools_changed'
  | 'system_changed'
  | 'messages_edited'
  | 'params_changed'
  | 'model_changed'
  | 'fork_diverged'
  | 'ttl_expired'
  | 'below_minimum'
  | 'lookback_exceeded'
  | 'concurrent'
  | 'unexplained';

/** One request whose cached prefix was written again (or never read), with its cause and price. */
export interface Miss {
  requestId: string;
  /** Position of the request in its session (1-based turn). */
  turn: number;
  session: string;
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
  change?: CapturedChange;
  byteOffset?: number;
  blockIndex?: number;
  idleSeconds?: number;
  ttlSeconds?: number;
  prefixTokens?: number;
  minimumTokens?: number;
  lookbackDistance?: number;
  forkOf?: string;
  expectedReadTokens?: number;
  actualReadTokens?: number;
}

/** One analyzed request. */
export interface AnalyzedRequest {
  id: string;
  session: string;
  turn: number;
  time: number;
  provider: string;
  model: string | undefined;
  status: number | undefined;
  usage: NormalizedUsage | undefined;
  cost: RequestCost | null;
  /** What the cache model says the request should have read (in provider tokens, scaled from estimates). */
  expectedRead: number | undefined;
  miss?: Miss;
  fork?: { parent: string };
  concurrent: boolean;
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
  generatedFrom: { records: number; files: number; skippedLines: number };
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
  };
  byCause: Array<{ cause: BustCause; misses: number; rewrittenTokens: number; waste: number }>;
  sessions: SessionSummary[];
  misses: Miss[];
  /** Per request, for charts (id, time, tokens, cause). Always present; the HTML draws from it. */
  requests: AnalyzedRequest[];
  prices: Array<{ model: string; label: string; date: string; source: string }>;
}

export interface AnalyzeOptions {
  prices: PriceTable;
  /** What-if: every breakpoint's TTL set to this (ms) in the cache model. */
  ttlOverride?: number;
  /** Keep per-request rows in the result (default true; the summary does not need them). */
  keepRequests?: boolean;
  /** Records allowed to arrive out of start order (the reorder window). Default 256. */
  window?: number;
}

interface Seen {
  id: string;
  session: string;
  model: string | undefined;
  provider: string;
  start: number;
  firstByte: number;
  /** Estimated tokens of the prefix this request had cached after it ran (read + written). */
  cachedEst: number;
  /** Estimated tokens per provider token. */
  scale: number;
  prefix: CapturedPrefix;
  ttlMs: number;
  continued: number;
}

const RECENT = 512;

/** The analysis over a stream of records. */
export async function analyzeRecords(
  records: AsyncIterable<CaptureRecord>,
  options: AnalyzeOptions,
): Promise<AnalysisResult> {
  const window = options.window ?? 256;
  const pending: CaptureRecord[] = [];
  const analyzer = new Analyzer(options);
  let count = 0;
  for await (const r of records) {
    count++;
    pending.push(r);
    if (pending.length > window) {
      pending.sort((a, b) => a.times.start - b.times.start);
      analyzer.add(pending.shift() as CaptureRecord);
    }
  }
  pending.sort((a, b) => a.times.start - b.times.start);
  for (const r of pending) analyzer.add(r);
  return analyzer.result(count);
}

class Analyzer {
  private readonly anthropic = new AnthropicCache();
  private readonly openai = new OpenAICache();
  /** Latest request per block key: the lineage index. Bounded. */
  private readonly byKey = new Map<string, string>();
  private readonly recent = new Map<string, Seen>();
  private readonly lastOfSession = new Map<string, string>();
  private readonly turns = new Map<string, number>();
  private readonly sessions = new Map<string, SessionSummary>();
  private readonly requests: AnalyzedRequest[] = [];
  private readonly misses: Miss[] = [];
  private readonly unpricedModels = new Set<string>();
  private readonly pricesUsed = new Map<
    string,
    { model: string; label: string; date: string; source: string }
  >();
  private outputTokens = 0;

  constructor(private readonly options: AnalyzeOptions) {}

  add(r: CaptureRecord): void {
    if (!r.prefix || r.method !== 'POST') return;
    const usage =
      r.usage?.normalized ??
      (r.usage
        ? r.provider === 'anthropic'
          ? normalizeAnthropicUsage(r.usage.raw)
          : normalizeOpenAIUsage(r.usage.raw)
        : undefined);
    const session = r.session.key;
    const turn = (this.turns.get(session) ?? 0) + 1;
    this.turns.set(session, turn);
    const start = r.times.start;
    const firstByte = r.times.firstByte ?? r.times.end ?? start;
    const prefix = r.prefix;
    const model = r.model;
    const totalEst = Math.max(1, prefix.totalTokens);
    const scale = usage && usage.inputTotal > 0 ? usage.inputTotal / totalEst : 1;

    // The cache model, on the captured prefix, at the captured times.
    const modelPrefix = prefixFromCapture(this.withTtl(prefix), model, r.betas);
    let expectedHitEst: number | undefined;
    let explain:
      | {
          pending: number;
          beyond: { blockIndex: number; tokens: number } | null;
          minimum: number;
          below: boolean;
        }
      | undefined;
    if (r.provider === 'anthropic') {
      const res = this.anthropic.evaluate(modelPrefix, 'capture', start, r.id, { explain: true });
      if ('usage' in res) {
        expectedHitEst = res.hit?.tokens ?? 0;
        explain = {
          pending: res.pendingMatches,
          beyond: res.beyondLookback,
          minimum: res.minimumTokens,
          below: res.belowMinimum.length > 0 && !res.writes.length,
        };
        this.anthropic.responseBegan(res, firstByte);
      }
    } else if (r.provider === 'openai') {
      const res = this.openai.evaluate(modelPrefix, 'capture', start, r.id, {});
      expectedHitEst = res.hit?.tokens ?? 0;
      explain = {
        pending: 0,
        beyond: null,
        minimum: res.facts.minCacheableTokens,
        below: prefix.totalTokens < res.facts.minCacheableTokens,
      };
      this.openai.responseBegan(res, firstByte);
    }

    // Lineage: the latest earlier request sharing the longest prefix; and the session's previous request.
    let lineage: Seen | undefined;
    for (let i = prefix.blocks.length - 1; i >= 0 && !lineage; i--) {
      const id = this.byKey.get((prefix.blocks[i] as { hash: string }).hash);
      if (id) lineage = this.recent.get(id);
    }
    const prevId = this.lastOfSession.get(session);
    const prev = prevId ? this.recent.get(prevId) : undefined;
    const parent = pickParent(prefix, prev, lineage);

    const row: AnalyzedRequest = {
      id: r.id,
      session,
      turn,
      time: start,
      provider: r.provider,
      model,
      status: r.status,
      usage,
      cost: null,
      expectedRead: expectedHitEst === undefined ? undefined : Math.round(expectedHitEst * scale),
      concurrent: !!prev && start < prev.firstByte,
    };
    const price = this.options.prices.lookup(model);
    if (usage) {
      row.cost = price ? costOf(usage, price) : null;
      if (price)
        this.pricesUsed.set(price.model, {
          model: price.model,
          label: price.label,
          date: price.date,
          source: price.source,
        });
      else if (model) this.unpricedModels.add(model);
      this.outputTokens += usage.output;
    }
    const isFork =
      parent && parent.session !== session ? true : !!parent && parent.continued > 0 && parent.id !== prevId;
    if (parent && isFork) row.fork = { parent: parent.id };
    if (usage?.cacheReported && r.status !== undefined && r.status < 400) {
      const miss = this.classify(r, usage, scale, parent, isFork, row, explain, expectedHitEst);
      if (miss) {
        row.miss = miss;
        this.misses.push(miss);
      }
    }
    this.tally(row, usage);
    if (this.options.keepRequests !== false) this.requests.push(row);

    // Remember this request for the ones after it.
    const cachedEst = usage?.cacheReported ? (usage.cacheRead + usage.cacheWrite) / scale : 0;
    const ttlMs =
      this.options.ttlOverride ??
      (prefix.blocks.some((b) => b.cc?.ttl === '1h') || prefix.auto?.ttl === '1h'
        ? TTL_1H
        : r.provider === 'openai'
          ? 5 * 60_000
          : TTL_5M);
    if (parent) parent.continued++;
    const seen: Seen = {
      id: r.id,
      session,
      model,
      provider: r.provider,
      start,
      firstByte,
      cachedEst,
      scale,
      prefix,
      ttlMs,
      continued: 0,
    };
    this.recent.set(r.id, seen);
    if (this.recent.size > RECENT) {
      const oldest = this.recent.keys().next().value;
      if (oldest !== undefined) this.recent.delete(oldest);
    }
    this.lastOfSession.set(session, r.id);
    // Index only the blocks this request added: the shared ones already lead to its lineage.
    const from = lineage ? lineagePrefixLength(prefix, lineage) : 0;
    for (let i = from; i < prefix.blocks.length; i++) {
      const key = (prefix.blocks[i] as { hash: string }).hash;
      this.byKey.delete(key);
      this.byKey.set(key, r.id);
    }
    while (this.byKey.size > 2_000_000) {
      const oldest = this.byKey.keys().next().value;
      if (oldest === undefined) break;
      this.byKey.delete(oldest);
    }
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

  private classify(
    r: CaptureRecord,
    usage: NormalizedUsage,
    scale: number,
    parent: Seen | undefined,
    isFork: boolean,
    row: AnalyzedRequest,
    explain:
      | {
          pending: number;
          beyond: { blockIndex: number; tokens: number } | null;
          minimum: number;
          below: boolean;
        }
      | undefined,
    expectedHitEst: number | undefined,
  ): Miss | undefined {
    const readEst = usage.cacheRead / scale;
    const base = { requestId: r.id, turn: row.turn, session: row.session, time: row.time, model: row.model };
    const price = this.options.prices.lookup(row.model);
    const make = (cause: BustCause, detail: MissDetail, rewrittenEst: number, parentId?: string): Miss => {
      const rewrittenTokens = Math.max(0, Math.round(rewrittenEst * scale));
      const oneHour = r.prefix?.blocks.some((b) => b.cc?.ttl === '1h') ?? false;
      const waste = price ? wasteOf(rewrittenTokens, price, r.provider, oneHour, usage) : null;
      const miss: Miss = { ...base, cause, detail, rewrittenTokens, waste, sentence: '' };
      if (parentId) miss.parentId = parentId;
      const diag = providerDiagnosis(r, cause);
      if (diag) miss.providerDiagnosis = diag;
      return miss;
    };
    if (!parent) {
      // Nothing earlier shares this prefix: the first write of a conversation. Not waste.
      if (usage.cacheWrite > 0 || usage.uncached > 0) {
        if (explain?.below && usage.cacheWrite === 0) {
          return make(
            'below_minimum',
            {
              prefixTokens: Math.round((r.prefix?.totalTokens ?? 0) * scale),
              minimumTokens: explain.minimum,
            },
            0,
          );
        }
        return usage.cacheWrite > 0 ? make('cold_start', {}, 0) : undefined;
      }
      return undefined;
    }
    const cachedBefore = parent.cachedEst;
    if (cachedBefore <= 0) {
      if (explain?.below && usage.cacheRead === 0) {
        return make(
          'below_minimum',
          { prefixTokens: Math.round((r.prefix?.totalTokens ?? 0) * scale), minimumTokens: explain.minimum },
          0,
          parent.id,
        );
      }
      return undefined;
    }
    const d = capturedDivergence(parent.prefix, parent.model, r.prefix as CapturedPrefix, r.model);
    const sharedEst = d ? d.sharedTokens : Math.min(parent.prefix.totalTokens, r.prefix?.totalTokens ?? 0);
    const reusable = Math.min(cachedBefore, sharedEst);
    const lostToChange = cachedBefore - reusable;
    const tolerance = Math.max(16, cachedBefore * 0.02);
    if (d && lostToChange > tolerance && readEst < cachedBefore - tolerance) {
      const rewritten = Math.max(0, cachedBefore - Math.max(readEst, 0));
      const detail: MissDetail = {
        change: d.change,
        blockIndex: d.index,
        ...(d.byteOffset !== undefined ? { byteOffset: d.byteOffset } : {}),
      };
      if (isFork) return make('fork_diverged', { ...detail, forkOf: parent.id }, rewritten, parent.id);
      const cause: BustCause =
        d.change.level === 'model'
          ? 'model_changed'
          : d.change.level === 'params'
            ? 'params_changed'
            : d.change.level === 'tools'
              ? 'tools_changed'
              : d.change.level === 'system'
                ? 'system_changed'
                : 'messages_edited';
      return make(cause, detail, rewritten, parent.id);
    }
    // The request shares what the parent cached; did it read it?
    if (readEst >= reusable - tolerance) return undefined;
    const rewritten = reusable - readEst;
    const idle = (r.times.start - parent.start) / 1000;
    if (r.times.start < parent.firstByte || (explain && explain.pending > 0 && !expectedHitEst)) {
      return make('concurrent', { idleSeconds: idle }, rewritten, parent.id);
    }
    if (explain?.beyond && (expectedHitEst ?? 0) < explain.beyond.tokens) {
      const bp = r.prefix?.blocks.findIndex((b, i) => i > (explain.beyond?.blockIndex ?? 0) && b.cc) ?? -1;
      return make(
        'lookback_exceeded',
        {
          blockIndex: explain.beyond.blockIndex,
          lookbackDistance: bp >= 0 ? bp - explain.beyond.blockIndex + 1 : undefined,
        },
        rewritten,
        parent.id,
      );
    }
    if (idle * 1000 > parent.ttlMs) {
      return make(
        'ttl_expired',
        { idleSeconds: Math.round(idle), ttlSeconds: parent.ttlMs / 1000 },
        rewritten,
        parent.id,
      );
    }
    if (explain?.below) {
      return make(
        'below_minimum',
        { prefixTokens: Math.round((r.prefix?.totalTokens ?? 0) * scale), minimumTokens: explain.minimum },
        rewritten,
        parent.id,
      );
    }
    return make(
      'unexplained',
      {
        expectedReadTokens: Math.round((expectedHitEst ?? reusable) * scale),
        actualReadTokens: usage.cacheRead,
      },
      rewritten,
      parent.id,
    );
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
    };
  }
}

/** The request to compare with: the session's previous request, unless the lineage shares more. */
function pickParent(
  prefix: CapturedPrefix,
  prev: Seen | undefined,
  lineage: Seen | undefined,
): Seen | undefined {
  if (!prev) return lineage;
  if (!lineage || lineage.id === prev.id) return prev;
  const withPrev = lineagePrefixLength(prefix, prev);
  // A request that extends its session's previous one is the main line, whatever siblings share with it.
  if (withPrev === prev.prefix.blocks.length) return prev;
  return lineagePrefixLength(prefix, lineage) > withPrev ? lineage : prev;
}

function lineagePrefixLength(prefix: CapturedPrefix, other: Seen): number {
  const a = prefix.blocks;
  const b = other.prefix.blocks;
  const n = Math.min(a.length, b.length);
  // Cumulative keys: binary search for the first differing block.
  let lo = 0;
  let hi = n;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((a[mid] as { hash: string }).hash === (b[mid] as { hash: string }).hash) lo = mid + 1;
    else hi = mid;
  }
  return lo;
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
