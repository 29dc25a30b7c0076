// The OpenAI prompt-cache models: automatic caching before GPT-5.6 (1,024 minimum, 128-token or interval
// granularity, retention, optional overflow routing) and GPT-5.6+ breakpoints. Pure: time is passed in.

import { hash } from 'node:crypto';
import type { Prefix, PrefixBlock } from '../prefix/build-prefix.js';
import { stableJson } from '../prefix/stable-json.js';
import { type CacheEvidence, type Unreadable, unreadableEntries } from './cache-evidence.js';
import { type CacheEntry, EntryStore, entrySnapshot } from './entry-store.js';
import { ExpiringRecords } from './expiring-records.js';

/** How one model caches. */
export interface OpenAIModelFacts {
  scheme: 'automatic' | 'breakpoints';
  /** Automatic scheme: reported cached tokens round down to this (128; GPT-5.5 breakpoints every 2,048). */
  granularity: number;
  minCacheableTokens: number;
}

/** Facts by model id (reference/openai/prompt-caching.md, 2026-09-11). */
export function openaiModelFacts(model: string | undefined): OpenAIModelFacts {
  const m = /^gpt-(\d+)(?:\.(\d+))?/.exec(model ?? '');
  const major = m ? Number(m[1]) : 0;
  const minor = m?.[2] ? Number(m[2]) : 0;
  if (major > 5 || (major === 5 && minor >= 6))
    return { scheme: 'breakpoints', granularity: 1, minCacheableTokens: 1024 };
  if (major === 5 && minor === 5) return { scheme: 'automatic', granularity: 2048, minCacheableTokens: 1024 };
  return { scheme: 'automatic', granularity: 128, minCacheableTokens: 1024 };
}

export const OPENAI_TTL_IN_MEMORY = 5 * 60_000;
export const OPENAI_TTL_24H = 24 * 60 * 60_000;
export const OPENAI_TTL_BREAKPOINTS = 30 * 60_000;
const MAX_WRITES = 4;

/** What one request read and wrote. */
export interface OpenAICacheResult {
  facts: OpenAIModelFacts;
  totalTokens: number;
  cachedTokens: number;
  /** GPT-5.6+: tokens written (billed at 1.25×); undefined on the automatic scheme. */
  cacheWriteTokens: number | undefined;
  hit: { blockIndex: number; tokens: number } | null;
  /**
   * Entries this request wrote, as they stood after it (copies: a later request's read or write does not
   * change them); readable once {@link OpenAICache.responseBegan} is called with this result.
   */
  writes: CacheEntry[];
  /** The lookup boundaries that were tried (block indices), longest first. */
  boundaries: number[];
  /** Sent to another machine by overflow routing: a cold miss whatever the cache holds. */
  overflowed: boolean;
  /** What could be read and why not more (the scan for unread entries runs only with `explain`). */
  evidence: CacheEvidence;
}

/** Options for an {@link OpenAICache}. */
export interface OpenAICacheOptions {
  store?: EntryStore;
  /**
   * Overflow routing (off by default): above this many requests a minute for one prefix and key, a
   * request lands on another machine and misses. The docs say about 15.
   */
  overflowPerMinute?: number;
}

/** The request fields the model reads besides the prefix. */
export interface OpenAIRequestOptions {
  /** `prompt_cache_retention`: `in_memory` (model: 5 minutes) or `24h`. Default `in_memory` (model choice). */
  retention?: string;
  /** `prompt_cache_options.mode` on GPT-5.6+: `implicit` (default) or `explicit`. */
  mode?: string;
  /** Find why an entry beyond the read was not read (the analyzer asks; the simulator need not). */
  explain?: boolean;
}

/** The cache of one simulated (or analyzed) OpenAI organization. */
export class OpenAICache {
  readonly store: EntryStore;
  /** The stored entries behind each result's copies, for {@link responseBegan} to make readable. */
  private readonly written = new WeakMap<object, CacheEntry[]>();
  private readonly overflowLimit: number | undefined;
  private readonly routes = new Map<string, number[]>();

  constructor(options: OpenAICacheOptions = {}) {
    this.store = options.store ?? new EntryStore();
    this.overflowLimit = options.overflowPerMinute;
  }

  evaluate(
    prefix: Prefix,
    scope: string,
    start: number,
    writer: string,
    opts: OpenAIRequestOptions = {},
  ): OpenAICacheResult {
    this.store.sweep(start);
    const facts = openaiModelFacts(prefix.model);
    const blocks = prefix.blocks;
    const keyAt = (i: number) => `${scope}|${blocks[i]?.hash}`;
    const eligible = (i: number) => (blocks[i]?.cumulativeTokens ?? 0) >= facts.minCacheableTokens;
    const overflowed = this.routeOverflows(prefix, scope, start);

    let boundaries: number[];
    let writeAt: number[];
    let ttl: number;
    if (facts.scheme === 'automatic') {
      boundaries = [];
      for (let i = blocks.length - 1; i >= 0; i--) if (eligible(i)) boundaries.push(i);
      writeAt = [...boundaries].reverse();
      ttl = opts.retention === '24h' ? OPENAI_TTL_24H : OPENAI_TTL_IN_MEMORY;
    } else {
      const plan = breakpointPlan(prefix, opts.mode === 'explicit' ? 'explicit' : 'implicit');
      boundaries = plan.lookups.filter(eligible);
      writeAt = plan.writes.filter(eligible);
      ttl = OPENAI_TTL_BREAKPOINTS;
    }

    let hit: OpenAICacheResult['hit'] = null;
    if (!overflowed) {
      for (const i of boundaries) {
        const entry = this.store.lookup(keyAt(i), start);
        if (entry) {
          hit = { blockIndex: i, tokens: blocks[i]?.cumulativeTokens ?? 0 };
          this.store.touch(entry, start);
          break;
        }
      }
    }
    // What this request could not read, found before its own writes land (they are not "earlier").
    const unreadable: Unreadable[] = [];
    if (opts.explain) {
      if (overflowed) unreadable.push({ reason: 'other_route' });
      else {
        unreadable.push(...unreadableEntries(prefix, this.store, scope, start, hit?.blockIndex ?? -1));
      }
    }
    const written: CacheEntry[] = [];
    if (!overflowed) {
      for (const i of writeAt) {
        if (hit && i <= hit.blockIndex) continue;
        const tokens = blocks[i]?.cumulativeTokens ?? 0;
        written.push(this.store.write(keyAt(i), tokens, ttl, start, writer, Number.POSITIVE_INFINITY));
      }
    }
    const writes = written.map(entrySnapshot);
    const hitTokens = hit?.tokens ?? 0;
    const cachedTokens =
      facts.scheme === 'automatic'
        ? Math.floor(hitTokens / facts.granularity) * facts.granularity
        : hitTokens;
    let cacheWriteTokens: number | undefined;
    if (facts.scheme === 'breakpoints') {
      const last = writes.reduce((m, w) => Math.max(m, w.tokens), hitTokens);
      cacheWriteTokens = last - hitTokens;
    }
    if (opts.explain) {
      if (hitTokens > cachedTokens)
        unreadable.push({
          reason: 'rounded',
          tokens: hitTokens - cachedTokens,
          granularity: facts.granularity,
        });
      if (!writes.length && !hit && prefix.totalTokens < facts.minCacheableTokens)
        unreadable.push({
          reason: 'below_minimum',
          tokens: prefix.totalTokens,
          minimum: facts.minCacheableTokens,
        });
    }
    const cachedAfter = writes.reduce((m, w) => Math.max(m, w.tokens), hitTokens);
    const result: OpenAICacheResult = {
      evidence: {
        readTokens: cachedTokens,
        cachedAfterTokens: cachedAfter,
        writesReported: facts.scheme === 'breakpoints',
        ttlMs: ttl,
        unreadable,
      },
      facts,
      totalTokens: prefix.totalTokens,
      cachedTokens,
      cacheWriteTokens,
      hit,
      writes,
      boundaries,
      overflowed,
    };
    if (written.length) this.written.set(result, written);
    return result;
  }

  /** The writing response has sent its first byte: what it wrote becomes readable from `at`. */
  responseBegan(result: OpenAICacheResult, at: number): void {
    const written = this.written.get(result);
    if (written) this.store.markReadable(written, at);
    // The result's own copies say so too: this request's response began (another's later does not count).
    this.store.markReadable(result.writes, at);
  }

  private routeOverflows(prefix: Prefix, scope: string, now: number): boolean {
    if (this.overflowLimit === undefined) return false;
    // Routing hashes about the first 256 tokens (and the key, folded into every block key).
    let i = 0;
    while (i < prefix.blocks.length - 1 && (prefix.blocks[i]?.cumulativeTokens ?? 0) < 256) i++;
    const route = `${scope}|${prefix.blocks[i]?.hash ?? prefix.levels.tools.foldHash}`;
    const times = (this.routes.get(route) ?? []).filter((t) => t > now - 60_000);
    times.push(now);
    this.routes.set(route, times);
    return times.length > this.overflowLimit;
  }
}

/**
 * GPT-5.6+ breakpoints: where to look (longest first) and where to write (at most four). Implicit mode
 * adds a breakpoint at the end of the latest eligible message: user messages, the last of a run of tool
 * outputs, the last developer message of the initial run.
 */
export function breakpointPlan(
  prefix: Prefix,
  mode: 'implicit' | 'explicit',
): { lookups: number[]; writes: number[] } {
  const explicit = prefix.blocks.filter((b) => b.cacheControl && b.level === 'messages').map((b) => b.index);
  const lookups = new Set<number>([...explicit.slice(0, 2), ...explicit.slice(-50)]);
  let writes = explicit.slice(-MAX_WRITES);
  if (mode === 'implicit') {
    const { ends, developerEnd } = eligibleMessageEnds(prefix);
    const implicit = ends[ends.length - 1];
    if (implicit !== undefined) {
      lookups.add(implicit);
      writes = [...explicit.slice(-(MAX_WRITES - 1)), implicit];
    }
    for (const e of ends.slice(-21, -1)) lookups.add(e);
    if (developerEnd !== undefined) lookups.add(developerEnd);
  }
  return {
    lookups: [...lookups].sort((a, b) => b - a),
    writes: [...new Set(writes)].sort((a, b) => a - b),
  };
}

const TOOL_OUTPUT_KINDS = new Set(['function_call_output', 'custom_tool_call_output']);

function messageRole(b: PrefixBlock): string {
  if (b.role === 'tool' || TOOL_OUTPUT_KINDS.has(b.kind)) return 'tool';
  return b.role ?? 'item';
}

/** The last block index of each eligible message, in order, and the end of the initial developer run. */
function eligibleMessageEnds(prefix: Prefix): { ends: number[]; developerEnd: number | undefined } {
  const m = prefix.levels.messages;
  const messages: Array<{ role: string; end: number }> = [];
  for (let i = m.start; i < m.end; i++) {
    const b = prefix.blocks[i] as PrefixBlock;
    const last = messages[messages.length - 1];
    const index = b.messageIndex ?? -1;
    if (last && (prefix.blocks[last.end]?.messageIndex ?? -2) === index) last.end = i;
    else messages.push({ role: messageRole(b), end: i });
  }
  const ends: number[] = [];
  let developerEnd: number | undefined;
  let initial = true;
  for (let k = 0; k < messages.length; k++) {
    const msg = messages[k] as { role: string; end: number };
    const next = messages[k + 1];
    const developer = msg.role === 'developer' || msg.role === 'system';
    if (initial && developer) {
      if (!next || !(next.role === 'developer' || next.role === 'system')) {
        developerEnd = msg.end;
        ends.push(msg.end);
      }
      continue;
    }
    initial = false;
    if (msg.role === 'user') ends.push(msg.end);
    else if (msg.role === 'tool' && next?.role !== 'tool') ends.push(msg.end);
  }
  return { ends, developerEnd };
}

/** `prompt_cache_diagnostics` on a Responses response that asked with `comparison_response_id`. */
export type OpenAIDiagnostics =
  | { type: 'cache_hit' }
  | { type: 'cache_miss'; reason: string; comparison_reusable_tokens: number; cache_missed_tokens: number }
  | { type: 'comparison_response_not_found' | 'unavailable' };

interface OpenAIFingerprint {
  fields: Record<string, string>;
  tools: string;
  inputKeys: string[];
  inputTokens: number[];
  total: number;
}

/** Remembers responses and compares a request with the one a `comparison_response_id` names. */
export class OpenAIDiagnosticsStore {
  private readonly records: ExpiringRecords<OpenAIFingerprint>;

  constructor(retentionMs = 60 * 60_000, max = 100_000) {
    this.records = new ExpiringRecords(retentionMs, max);
  }

  remember(id: string, prefix: Prefix, serviceTier: string | undefined, now: number): void {
    this.records.set(id, openaiFingerprint(prefix, serviceTier), now);
  }

  clear(): void {
    this.records.clear();
  }

  compare(
    comparisonId: string,
    prefix: Prefix,
    serviceTier: string | undefined,
    now: number,
  ): OpenAIDiagnostics {
    const prev = this.records.get(comparisonId, now);
    if (!prev) return { type: 'comparison_response_not_found' };
    const cur = openaiFingerprint(prefix, serviceTier);
    const miss = (reason: string, from: number) => ({
      type: 'cache_miss' as const,
      reason,
      comparison_reusable_tokens: prev.total,
      cache_missed_tokens: prev.total - from,
    });
    for (const [field, reason] of FIELD_REASONS) {
      if (prev.fields[field] !== cur.fields[field]) return miss(reason, 0);
    }
    if (prev.tools !== cur.tools) return miss('tools_changed', 0);
    let i = 0;
    while (i < prev.inputKeys.length && prev.inputKeys[i] === cur.inputKeys[i]) i++;
    if (i === prev.inputKeys.length) return { type: 'cache_hit' };
    return miss('input_changed', i > 0 ? (prev.inputTokens[i - 1] ?? 0) : 0);
  }
}

const FIELD_REASONS: ReadonlyArray<[string, string]> = [
  ['model', 'model_changed'],
  ['prompt_cache_key', 'prompt_cache_key_changed'],
  ['service_tier', 'service_tier_changed'],
  ['text.format', 'text_format_changed'],
  ['response_format', 'text_format_changed'],
  ['reasoning.effort', 'reasoning_effort_changed'],
  ['reasoning_effort', 'reasoning_effort_changed'],
  ['text.verbosity', 'verbosity_changed'],
  ['verbosity', 'verbosity_changed'],
  ['context_management', 'context_compacted'],
  ['parallel_tool_calls', 'tools_changed'],
];

function openaiFingerprint(prefix: Prefix, serviceTier: string | undefined): OpenAIFingerprint {
  const params = prefix.levels.tools.params;
  const fields: Record<string, string> = { service_tier: String(serviceTier ?? 'default') };
  for (const [field] of FIELD_REASONS)
    if (field !== 'service_tier') fields[field] = stableJson(params[field]);
  const t = prefix.levels.tools;
  const tools = hash(
    'sha256',
    prefix.blocks
      .slice(t.start, t.end)
      .map((b) => b.contentHash)
      .join(','),
    'hex',
  );
  const input = prefix.blocks.slice(prefix.levels.system.start);
  return {
    fields,
    tools,
    inputKeys: input.map((b) => b.hash),
    inputTokens: input.map((b) => b.cumulativeTokens),
    total: prefix.totalTokens,
  };
}
