// The fleet's state on Redis: before a request's fixes run, one script loads what the resolver and the
// commit will read into a ConversationView (or, for a conversation this proxy served last and nobody
// touched since, its tracked copy does, with no round trip); the commit is a compare-and-swap, written
// before the response's last byte and never waited for by the response. It never holds a request longer
// than its budget and never alters one: late or down means fail open.

import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { Redis } from 'ioredis';
import { longestCacheTtlMs } from '../cache/longest-ttl.js';
import type { PassingEntry } from '../conversation/conversation-store.js';
import {
  type AnsweredRequest,
  ConversationTracker,
  conversationRequest,
  countsAsTurn,
  type TrackedRequest,
} from '../conversation/conversation-tracker.js';
import { commitConversation, resolveConversation } from '../conversation/resolve-conversation.js';
import type { HeaderLookup } from '../conversation/session-label.js';
import { LruMap } from '../core/lru-map.js';
import type { Prefix } from '../prefix/build-prefix.js';
import {
  ConversationView,
  emptyLoadedState,
  type LoadedState,
  type MissingKeys,
  mergeLoaded,
  missingCount,
  versionsDisagree,
} from './conversation-view.js';
import {
  decodeFixState,
  encodeFixState,
  type PartMemo,
  partsOf,
  type RequestFixState,
} from './fix-state-codec.js';
import type {
  PreparedRequest,
  PrepareResult,
  ProxyState,
  StateCommit,
  StateHealth,
  StateUnavailable,
} from './proxy-state.js';
import { RedisLiveFeed } from './redis-live-feed.js';
import { OUT, RedisLiveness } from './redis-liveness.js';
import { type CacheMark, RedisReadCache } from './redis-read-cache.js';
import { COMMIT_SCRIPT, HEARTBEAT_SCRIPT, LOAD_SCRIPT } from './redis-scripts.js';
import type { StateSpec } from './state-url.js';
import { withinBudget } from './within-budget.js';

/** How long Redis may send nothing back while a request waits, by default (ms). */
export const DEFAULT_BUDGET_MS = 1_000;

export interface RedisProxyStateOptions {
  spec: Extract<StateSpec, { kind: 'redis' }>;
  /** Every key starts with it. Default `cacheward:`. */
  prefix?: string;
  /**
   * How long Redis may send nothing back while a request waits before it counts as out and the request
   * goes out unfixed (ms; raised to ten of its slowest recent round trips when they are slower). Default
   * 1,000. A slow Redis that still answers is waited for: an unfixed request busts a fixed conversation.
   */
  budgetMs?: number;
  /** How often this proxy says it is alive (ms). Default 1,000; an instance silent for 3× is gone. */
  heartbeatMs?: number;
  /** Keep a tracked copy of the conversations served last (default true; false: every request loads). */
  readCache?: boolean;
  log?: (line: string) => void;
}

const INVALIDATE = '__redis__:invalidate';

/** What a key outlives the cache by: the request's own duration and clocks that disagree (seconds). */
const TTL_MARGIN_SECONDS = 15 * 60;

/**
 * Keys live this long after their last write: as long as the cache models say anything of the request's
 * provider can stay readable (the memory state and its file keep it exactly as long), and a margin.
 */
export function stateTtlSeconds(prefix: Prefix): number {
  return Math.ceil(longestCacheTtlMs(prefix.format) / 1000) + TTL_MARGIN_SECONDS;
}

interface ScriptClient {
  cwLoad(...args: string[]): Promise<string[]>;
  cwCommit(...args: string[]): Promise<[number, string?]>;
  cwHeartbeat(key: string, member: string, windowMs: string): Promise<[number, string[]]>;
}

interface LoadSpec {
  walk?: string[];
  label?: string;
  wantFix?: boolean;
  r?: string[];
  c?: string[];
  e?: string[];
  p?: string[];
  l?: string[];
  f?: string[];
  /** State parts the caller holds decoded (not sent again), and parts asked for by hash. */
  have?: string[];
  s?: string[];
}

/** A list as the scripts read it: its length, then its values. */
const counted = (xs: readonly string[]): string[] => [String(xs.length), ...xs];

function loadArgs(prefix: string, s: LoadSpec): string[] {
  return [
    prefix,
    s.label ?? '',
    s.wantFix ? '1' : '0',
    ...counted(s.walk ?? []),
    ...counted(s.r ?? []),
    ...counted(s.c ?? []),
    ...counted(s.e ?? []),
    ...counted(s.p ?? []),
    ...counted(s.l ?? []),
    ...counted(s.f ?? []),
    ...counted(s.have ?? []),
    ...counted(s.s ?? []),
  ];
}

/** Passing entries as the commit sends them: "transcript request cacheKey" lines (none holds a space). */
const packPassing = (entries: ReadonlyArray<[string, PassingEntry]>) =>
  entries.map(([t, e]) => `${t} ${e.request} ${e.cacheKey}`).join('\n');
/** A stored entry: "request cacheKey unixSeconds". */
function unpackPassing(text: string): PassingEntry {
  const [request = '', cacheKey = ''] = text.split(' ');
  return { request, cacheKey };
}

/** Fix documents by request and state parts by hash, as a load returned them ('' when absent). */
interface FixLoad {
  docs: Map<string, string>;
  parts: Map<string, string>;
}

interface Loaded {
  loaded: LoadedState;
  fix: FixLoad;
  resolution: TrackedRequest['resolution'];
  /** Where the read cache stood when the first load was sent (undefined: tracking was down). */
  mark: CacheMark | undefined;
}

/** A commit's arguments, and what it was built from (the view holds the state it leaves). */
interface BuiltCommit {
  args: string[];
  view: ConversationView;
  doc: string;
}

interface Inner {
  loaded: LoadedState;
  ttl: number;
  /** The parent's state parts by fix (a part that did not change is not sent again). */
  parentParts: Map<string, string>;
  /** The commit's arguments, built while the upstream works (see {@link RedisProxyState.stage}). */
  staged?: { after: RequestFixState | undefined; built: BuiltCommit };
  /** What the data came from: the load's mark, or the cached copy's (see redis-read-cache.ts). */
  mark: CacheMark | undefined;
  /** Resolved on the cached copy: the new turn's transcripts taken to end no request / have no passing entry. */
  absentEndings: string[];
  absentPassing: string[];
}

const CONFLICT = Symbol('conflict');

export class RedisProxyState implements ProxyState {
  readonly kind = 'redis' as const;
  readonly commitAt = 'end' as const;
  readonly local = new ConversationTracker();
  private readonly redis: Redis;
  /** The connection Redis pushes invalidations to (see redis-read-cache.ts). */
  private readonly sub: Redis | undefined;
  private subId: number | undefined;
  private tracking = 0;
  private trackingUp: (() => void) | undefined;
  private readonly cache = new RedisReadCache();
  private readonly scripts: ScriptClient;
  private readonly prefix: string;
  private readonly budgetMs: number;
  private readonly heartbeatMs: number;
  private readonly log: (line: string) => void;
  private readonly instanceId = `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
  private readonly inner = new WeakMap<PreparedRequest, Inner>();
  /** Fix states by content hash, decoded once (fixes never change the state they are given). */
  private readonly parts = new LruMap<{ state: unknown }>(2_048);
  /** Fix states' JSON and hashes by object, so a state handed on unchanged is not encoded again. */
  private readonly encoded: PartMemo = new WeakMap();
  /** Each label's latest state parts, which a load need not send again. */
  private readonly labelParts = new LruMap<string[]>(10_000);
  private heartbeat: NodeJS.Timeout | undefined;
  private member: string | undefined;
  private closing = false;
  private instances: StateHealth['instances'] = [];
  /** Whether Redis answers, and the outages (redis-liveness.ts). */
  private readonly liveness: RedisLiveness;
  /** The fleet's records for every proxy's live analysis (redis-live-feed.ts). */
  readonly feed: RedisLiveFeed;
  private readonly feedKey: string;
  /** Why the last request went out unfixed (an outage, a state that kept changing, a bad document). */
  private lastFailOpen: { at: number; reason: string } | undefined;
  private readonly counts = {
    prepared: 0,
    failedOpen: 0,
    committed: 0,
    recomputed: 0,
    notCommitted: 0,
    cached: 0,
  };

  private constructor(private readonly options: RedisProxyStateOptions) {
    this.prefix = options.prefix ?? 'cacheward:';
    this.budgetMs = options.budgetMs ?? DEFAULT_BUDGET_MS;
    this.heartbeatMs = options.heartbeatMs ?? 1_000;
    this.log = options.log ?? (() => {});
    const s = options.spec;
    this.liveness = new RedisLiveness({ limitMs: this.budgetMs, display: s.display, log: this.log });
    const connection = {
      host: s.host,
      port: s.port,
      db: s.db,
      ...(s.username ? { username: s.username } : {}),
      ...(s.password ? { password: s.password } : {}),
      ...(s.tls ? { tls: {} } : {}),
      lazyConnect: true,
      // A command while Redis is away fails at once (the request goes out unfixed), never queues. One
      // that Redis leaves unanswered is given up well after the request stopped waiting for it.
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: Math.max(10_000, this.budgetMs * 20),
      connectTimeout: 1_000,
      retryStrategy: (times: number) => Math.min(50 * times, 500),
    };
    this.redis = new Redis(connection);
    this.redis.defineCommand('cwLoad', { numberOfKeys: 0, lua: LOAD_SCRIPT });
    this.redis.defineCommand('cwCommit', { numberOfKeys: 0, lua: COMMIT_SCRIPT });
    this.redis.defineCommand('cwHeartbeat', { numberOfKeys: 1, lua: HEARTBEAT_SCRIPT });
    this.scripts = this.redis as unknown as ScriptClient;
    this.feedKey = `${this.prefix}live`;
    this.feed = new RedisLiveFeed({
      redis: this.redis,
      liveness: this.liveness,
      key: this.feedKey,
      instance: this.instanceId,
      log: this.log,
    });
    this.redis.on('error', (err: Error) => {
      if (!this.closing) this.liveness.begin('down', `Redis at ${s.display}: ${err.message}`);
    });
    this.redis.on('close', () => {
      if (!this.closing) this.liveness.begin('down', `Redis at ${s.display} closed the connection`);
    });
    this.redis.on('ready', () => {
      this.liveness.ready();
      void this.startTracking();
    });
    this.redis.on('close', () => this.stopTracking());
    if (options.readCache !== false) {
      const sub = new Redis({ ...connection, autoResubscribe: false });
      this.sub = sub;
      sub.on('error', () => this.stopTracking());
      sub.on('close', () => {
        this.subId = undefined;
        this.stopTracking();
      });
      sub.on('ready', () => {
        void (async () => {
          try {
            const id = Number(await sub.client('ID'));
            await sub.subscribe(INVALIDATE);
            this.subId = id;
            await this.startTracking();
          } catch {
            // the subscriber is not listening: no cached copy is trusted, every request loads
          }
        })();
      });
      sub.on('messageBuffer', (channel: Buffer, keys: Buffer[] | Buffer | null) => {
        if (String(channel) !== INVALIDATE) return;
        if (keys === null) this.cache.invalidated(null);
        else {
          // The feed's stream is written for every exchange and holds no conversation state.
          const names = (Array.isArray(keys) ? keys.map(String) : [String(keys)]).filter(
            (k) => k !== this.feedKey,
          );
          if (names.length) this.cache.invalidated(names);
        }
      });
    }
  }

  /**
   * Turns tracking on for the data connection, redirected to the subscriber, for every key under the
   * prefix that another connection writes. Until it answers, and after either connection drops, nothing
   * cached is trusted (a new epoch).
   */
  private async startTracking(): Promise<void> {
    const attempt = ++this.tracking;
    this.cache.down();
    const id = this.subId;
    if (id === undefined || this.redis.status !== 'ready' || this.sub?.status !== 'ready') return;
    try {
      await this.redis.client('TRACKING', 'OFF');
      await this.redis.client(
        'TRACKING',
        'ON',
        'REDIRECT',
        String(id),
        'BCAST',
        'PREFIX',
        this.prefix,
        'NOLOOP',
      );
      if (attempt === this.tracking && this.redis.status === 'ready' && this.subId === id) {
        this.cache.up();
        this.trackingUp?.();
      }
    } catch {
      // tracking refused (an old Redis, a proxy in between): every request loads
    }
  }

  private stopTracking(): void {
    this.tracking++;
    this.cache.down();
  }

  /** Connects (waiting at most `waitMs`); a Redis that is not there yet leaves the proxy degraded, not stopped. */
  static async connect(options: RedisProxyStateOptions, waitMs = 2_000): Promise<RedisProxyState> {
    const state = new RedisProxyState(options);
    // Tracking on before the first request too, when it comes quickly (else requests load until it is).
    const tracked = state.sub
      ? new Promise<void>((resolve) => {
          state.trackingUp = resolve;
        })
      : Promise.resolve();
    state.sub?.connect().catch(() => {});
    const ready = state.redis.connect().then(
      () => true,
      (err: Error) => {
        state.liveness.begin('down', `Redis at ${options.spec.display}: ${err.message}`);
        return false;
      },
    );
    // Scripts loaded before the first request, so it does not pay for sending and compiling them (and
    // their round trips are the first the wait limit follows).
    const warm = ready.then(async (up) => {
      if (!up) return false;
      await Promise.all(
        [LOAD_SCRIPT, COMMIT_SCRIPT, HEARTBEAT_SCRIPT].map((lua) =>
          state.liveness.watch(state.redis.script('LOAD', lua)),
        ),
      );
      await tracked;
      return true;
    });
    const r = await withinBudget(
      warm.catch(() => false),
      waitMs,
    );
    if (r !== true && !state.liveness.outage)
      state.liveness.begin('down', `Redis at ${options.spec.display} is not answering`);
    return state;
  }

  async prepare(id: string, prefix: Prefix, headers: HeaderLookup, time: number): Promise<PrepareResult> {
    const { label, request } = conversationRequest(id, prefix, headers, time);
    if (this.redis.status !== 'ready')
      return this.failOpen('unavailable', `Redis at ${this.options.spec.display} is ${this.redis.status}`);
    // A copy of the conversation this proxy served last needs no read, whatever Redis is doing.
    const warm = await this.fromCache(label, request, prefix);
    if (warm === OUT) return this.failOpen('unavailable', this.outReason());
    if (warm) return warm;
    // Only an outage sends a request out unfixed: a slow Redis (a busy machine) is waited for.
    if (await this.liveness.stillUnreachable()) return this.failOpen('unavailable', this.outReason());
    const work = this.resolveFresh(request, true).catch((err: Error) => err);
    const out = await this.liveness.wait(work, Date.now());
    if (out === OUT) return this.failOpen('unavailable', this.outReason());
    if (out === CONFLICT)
      return this.failOpen('conflict', 'the conversation changed on every read (3 attempts)');
    if (out instanceof Error) {
      if (out.name === 'ReplyError') this.liveness.begin('error', `Redis: ${out.message}`);
      return this.failOpen('unavailable', `Redis: ${out.message}`);
    }
    const parent = out.resolution.parent;
    let fix: RequestFixState | undefined;
    const doc = parent ? out.fix.docs.get(parent) : undefined;
    if (doc) {
      try {
        fix = decodeFixState(doc, (h) => this.part(h, out.fix));
      } catch (err) {
        return this.failOpen(
          'unavailable',
          `the fix state of ${parent} could not be read: ${(err as Error).message}`,
        );
      }
    }
    const prepared: PreparedRequest = {
      ok: true,
      tracked: { label, request, resolution: out.resolution, committed: false },
      states: fix?.states,
      parentPair: fix?.pair,
    };
    this.inner.set(prepared, {
      loaded: out.loaded,
      ttl: stateTtlSeconds(prefix),
      parentParts: doc ? partsOf(doc) : new Map(),
      mark: out.mark,
      absentEndings: [],
      absentPassing: [],
    });
    this.counts.prepared++;
    return prepared;
  }

  /**
   * Resolves a request on this proxy's copy of its label's state, when the label's latest request was
   * committed here and no key of that copy was written since (redis-read-cache.ts). The new turn's
   * transcripts (the request's message ends after that request's last) are taken to be unused, which the
   * commit verifies. Anything the copy does not hold, or a parent other than that request: undefined,
   * and the request loads.
   */
  private async fromCache(
    label: TrackedRequest['label'],
    request: TrackedRequest['request'],
    prefix: Prefix,
  ): Promise<PreparedRequest | typeof OUT | undefined> {
    const key = request.label;
    if (key === undefined || !this.cache.isLive) return undefined;
    // This proxy's own commit of the label's previous request comes first (it is usually in already);
    // when Redis goes out before it is, Redis is out for a read as well.
    const pending = this.cache.pendingOf(key);
    if (pending && (await this.liveness.wait(pending, Date.now())) === OUT) return OUT;
    const entry = this.cache.get(key, Date.now());
    if (!entry) return undefined;
    const ends = request.ends;
    let at = ends.length - 1;
    while (at >= 0 && (ends[at] as { transcript: string }).transcript !== entry.tipFinal) at--;
    const endings = new Map(entry.loaded.endings);
    const passing = new Map<string, PassingEntry | null>();
    const absentEndings: string[] = [];
    const absentPassing: string[] = [];
    if (at >= 0)
      for (let i = at + 1; i < ends.length; i++) {
        const t = (ends[i] as { transcript: string }).transcript;
        if (!endings.has(t)) {
          endings.set(t, []);
          absentEndings.push(t);
        }
        passing.set(t, null);
        absentPassing.push(t);
      }
    // The key of its last message is only appended to by its commit (LREM, RPUSH), never read to resolve it.
    if (request.last !== undefined && !endings.has(request.last)) endings.set(request.last, []);
    const loaded: LoadedState = { ...entry.loaded, endings, passing };
    const view = new ConversationView(loaded);
    const resolution = resolveConversation(view, request);
    const dry = new ConversationView(loaded);
    commitConversation(dry, request, resolution);
    if (missingCount(unionMissing(view.missing, dry.missing)) > 0) return undefined;
    const parent = resolution.parent;
    if (parent !== undefined && parent !== entry.tip) return undefined;
    const prepared: PreparedRequest = {
      ok: true,
      tracked: { label, request, resolution, committed: false },
      states: parent ? entry.fix.states : undefined,
      parentPair: parent ? entry.fix.pair : undefined,
    };
    this.inner.set(prepared, {
      loaded,
      ttl: stateTtlSeconds(prefix),
      parentParts: parent ? entry.parts : new Map(),
      mark: { since: entry.since, epoch: entry.epoch },
      absentEndings,
      absentPassing,
    });
    this.counts.prepared++;
    this.counts.cached++;
    return prepared;
  }

  async commit(
    p: PreparedRequest,
    route: string,
    status: number | undefined,
    after: RequestFixState | undefined,
  ): Promise<StateCommit> {
    const inner = this.inner.get(p);
    if (p.tracked.committed) return { outcome: 'committed' };
    if (!countsAsTurn(route, status)) return { outcome: 'not-turn' };
    p.tracked.committed = true;
    if (!inner) return this.notCommitted('it was not prepared by this state');
    // The script is written to Redis now, before the response's end reaches the client (Redis runs
    // commands in the order they arrive, so the client's next request, on any proxy, reads after it);
    // nobody waits for its answer but the capture record and this label's next request here.
    const work = this.commitNow(p, inner, after);
    const label = p.tracked.request.label;
    if (label !== undefined) this.cache.committing(label, work);
    return work;
  }

  private async commitNow(
    p: PreparedRequest,
    inner: Inner,
    after: RequestFixState | undefined,
  ): Promise<StateCommit> {
    const label = p.tracked.request.label;
    const staged = inner.staged?.after === after ? inner.staged : undefined;
    const fixArgs = staged ? undefined : this.fixArgs(p, inner, after);
    let lostOn: string | undefined;
    try {
      for (let attempt = 0; attempt < 4; attempt++) {
        const built =
          attempt === 0 && staged
            ? staged.built
            : this.commitArgs(p, inner, fixArgs ?? this.fixArgs(p, inner, after));
        const fixKey = built.doc ? `${this.prefix}f:${p.tracked.request.id}` : undefined;
        if (fixKey) this.cache.ownWrite(fixKey);
        const r = await this.liveness.watch(this.scripts.cwCommit(...built.args)).catch((err: Error) => {
          if (fixKey) this.cache.ownWriteDone(fixKey);
          throw err;
        });
        if (r[0] !== 1 && fixKey) this.cache.ownWriteDone(fixKey);
        if (r[0] === 1) {
          this.liveness.wrote();
          this.remember(p, inner, built, after);
          if (lostOn === undefined) {
            this.counts.committed++;
            return { outcome: 'committed' };
          }
          this.counts.recomputed++;
          const res = p.tracked.resolution;
          return {
            outcome: 'recomputed',
            note: {
              fix: 'state',
              changed: false,
              notes: [
                `another proxy changed conversation ${lostOn} first; this request was resolved again on the new state (${res.relation} ${res.conversation}, turn ${res.turn}) and committed`,
              ],
            },
          };
        }
        // Lost the race: resolve again on what is there now, and try to commit that.
        if (label !== undefined) this.cache.drop(label);
        lostOn = r[1] || p.tracked.resolution.conversation;
        const again = await this.resolveFresh(p.tracked.request, false);
        if (again === CONFLICT) break;
        inner.loaded = again.loaded;
        inner.mark = again.mark;
        inner.absentEndings = [];
        inner.absentPassing = [];
        p.tracked.resolution = again.resolution;
      }
      return this.notCommitted(`it lost the compare-and-swap on conversation ${lostOn} four times`);
    } catch (err) {
      if (label !== undefined) this.cache.drop(label);
      const message = (err as Error).message;
      this.liveness.lastFailure = { at: Date.now(), reason: `Redis: ${message}` };
      if (this.liveness.outage?.kind === 'oom') this.liveness.unrecorded++;
      return this.notCommitted(`Redis failed: ${message}`);
    }
  }

  /**
   * After a commit that succeeded: the state it left becomes this proxy's copy of its label, which the
   * label's next request here resolves on (if no key of it is written by anyone else meanwhile).
   */
  private remember(p: PreparedRequest, inner: Inner, built: BuiltCommit, after: RequestFixState | undefined) {
    const label = p.tracked.request.label;
    if (label === undefined) return;
    const last = p.tracked.request.ends[p.tracked.request.ends.length - 1];
    if (!after || !inner.mark || !built.doc || !last) {
      this.cache.drop(label);
      return;
    }
    const loaded = built.view.settled();
    const P = this.prefix;
    const keys = [`${P}t:${label}`, `${P}l:${label}`];
    for (const k of loaded.requests.keys()) keys.push(`${P}r:${k}`);
    for (const k of loaded.conversations.keys()) keys.push(`${P}c:${k}`);
    for (const k of loaded.versions.keys()) keys.push(`${P}v:${k}`);
    for (const k of loaded.endings.keys()) keys.push(`${P}e:${k}`);
    for (const k of loaded.labels.keys()) keys.push(`${P}l:${k}`);
    this.cache.put({
      label,
      tip: p.tracked.request.id,
      tipFinal: last.transcript,
      loaded,
      keys,
      since: inner.mark.since,
      epoch: inner.mark.epoch,
      at: Date.now(),
      fix: after,
      parts: partsOf(built.doc),
    });
  }

  /**
   * Builds the commit (the view's writes, the fix document) ahead of time, while the upstream works on
   * the request, so the commit itself is one round trip when the status arrives.
   */
  stage(p: PreparedRequest, after: RequestFixState | undefined): void {
    const inner = this.inner.get(p);
    if (!inner || p.tracked.committed || inner.staged) return;
    inner.staged = { after, built: this.commitArgs(p, inner, this.fixArgs(p, inner, after)) };
  }

  /** The fix document and the parts to send (new) or keep alive (as the parent had them). */
  private fixArgs(p: PreparedRequest, inner: Inner, after: RequestFixState | undefined): string[] {
    if (!after) return ['', '0', '0'];
    const { doc, parts } = encodeFixState(after, this.encoded);
    const fresh: string[] = [];
    const touch: string[] = [];
    const kept = new Set(inner.parentParts.values());
    const mine: string[] = [];
    for (const [name, h] of partsOf(doc)) {
      mine.push(h);
      if (!this.parts.get(h)) this.parts.set(h, { state: after.states.get(name) });
      if (kept.has(h)) touch.push(h);
      else fresh.push(h, parts.get(h) as string);
    }
    const label = p.tracked.request.label;
    if (label !== undefined) this.labelParts.set(label, mine);
    return [doc, ...counted(fresh), ...counted(touch)];
  }

  /** One state part, decoded once: from the cache, else from what a load returned. */
  private part(h: string, fix: FixLoad): unknown {
    const cached = this.parts.get(h);
    if (cached) return cached.state;
    const raw = fix.parts.get(h);
    if (!raw) return undefined;
    const state: unknown = JSON.parse(raw);
    this.parts.set(h, { state });
    if (typeof state === 'object' && state !== null) this.encoded.set(state, { json: raw, hash: h });
    return state;
  }

  private commitArgs(p: PreparedRequest, inner: Inner, fixArgs: string[]): BuiltCommit {
    const view = new ConversationView(inner.loaded);
    commitConversation(view, p.tracked.request, p.tracked.resolution);
    const w = view.writes();
    const [doc = '', ...partLists] = fixArgs;
    const args = [
      this.prefix,
      String(inner.ttl),
      p.tracked.request.id,
      doc,
      packPassing(w.passing),
      ...partLists,
      ...counted(w.checks.flatMap(([c, v]) => [c, String(v)])),
      ...counted(w.requests.flatMap((n) => [n.id, JSON.stringify(n)])),
      ...counted(w.conversations.flatMap((c) => [c.id, JSON.stringify(c)])),
      ...counted(w.endings.flat()),
      ...counted(w.labels.flat()),
      ...counted(inner.absentEndings),
      ...counted(inner.absentPassing),
    ];
    return { args, view, doc };
  }

  async track(answered: AnsweredRequest): Promise<TrackedRequest | undefined> {
    const { id, prefix, headers, time, route, status } = answered;
    if (this.redis.status !== 'ready' || this.liveness.unreachable) return undefined;
    const { label, request } = conversationRequest(id, prefix, headers, time);
    try {
      const out = await this.liveness.wait(
        this.resolveFresh(request, false).catch((err: Error) => err),
        Date.now(),
      );
      if (out === CONFLICT || out === OUT) return undefined;
      if (out instanceof Error) throw out;
      const tracked: TrackedRequest = { label, request, resolution: out.resolution, committed: false };
      const prepared: PreparedRequest = { ok: true, tracked, states: undefined, parentPair: undefined };
      this.inner.set(prepared, {
        loaded: out.loaded,
        ttl: stateTtlSeconds(prefix),
        parentParts: new Map(),
        mark: out.mark,
        absentEndings: [],
        absentPassing: [],
      });
      const c = await this.commit(prepared, route, status, undefined);
      return c.outcome === 'not-committed' ? undefined : tracked;
    } catch (err) {
      this.liveness.lastFailure = { at: Date.now(), reason: `Redis: ${(err as Error).message}` };
      return undefined;
    }
  }

  started(url: string): void {
    if (this.heartbeat) return;
    const member = JSON.stringify({ id: this.instanceId, url, pid: process.pid });
    this.member = member;
    const beat = () => {
      if (this.redis.status !== 'ready') return;
      // Waited for like a request's read, so a Redis gone silent shows on health with no request waiting.
      const sent = Date.now();
      const answer = this.liveness.watch(
        this.scripts.cwHeartbeat(`${this.prefix}instances`, member, String(this.heartbeatMs * 3)),
      );
      void this.liveness.wait(
        answer.catch(() => undefined),
        sent,
      );
      answer
        .then(([now, list]) => {
          const out: NonNullable<StateHealth['instances']> = [];
          for (let i = 0; i + 1 < list.length; i += 2) {
            try {
              const m = JSON.parse(list[i] as string) as { id: string; url: string; pid: number };
              out.push({ ...m, seenMsAgo: Math.max(0, now - Number(list[i + 1])) });
            } catch {
              // a member some other program wrote: not one of ours
            }
          }
          this.instances = out;
          this.liveness.wrote();
        })
        .catch((err: Error) => {
          this.liveness.lastFailure = { at: Date.now(), reason: `Redis: ${err.message}` };
        });
    };
    beat();
    this.heartbeat = setInterval(beat, this.heartbeatMs);
    this.heartbeat.unref();
  }

  health(): StateHealth {
    const live = this.liveness;
    const outage = live.outage;
    const down = this.redis.status !== 'ready' || outage !== undefined;
    const last = [live.lastFailure, this.lastFailOpen].reduce<{ at: number; reason: string } | undefined>(
      (x, y) => (!x || (y && y.at > x.at) ? y : x),
      undefined,
    );
    return {
      kind: 'redis',
      status: down ? 'degraded' : 'ok',
      url: this.options.spec.display,
      prefix: this.prefix,
      budgetMs: this.budgetMs,
      waitLimitMs: live.limitMs(),
      ...(outage
        ? { outage: { kind: outage.kind, since: new Date(outage.at).toISOString(), reason: outage.reason } }
        : {}),
      failedOpen: this.counts.failedOpen,
      ...(last ? { lastFailure: { at: new Date(last.at).toISOString(), reason: last.reason } } : {}),
      outages: live.outages,
      ...(live.recoveredAt ? { recoveredAt: new Date(live.recoveredAt).toISOString() } : {}),
      recomputed: this.counts.recomputed,
      notCommitted: this.counts.notCommitted,
      readCache: {
        tracking: this.cache.isLive,
        cached: this.counts.cached,
        invalidations: this.cache.counts.invalidations,
      },
      instances: down ? [] : this.instances,
      instance: this.instanceId,
      feed: this.feed.health(),
    };
  }

  metricsText(): string {
    const c = this.counts;
    return [
      '# HELP cacheward_state_requests_total Requests that asked the shared state, by outcome.',
      '# TYPE cacheward_state_requests_total counter',
      `cacheward_state_requests_total{outcome="prepared"} ${c.prepared}`,
      `cacheward_state_requests_total{outcome="failed_open"} ${c.failedOpen}`,
      `cacheward_state_requests_total{outcome="committed"} ${c.committed}`,
      `cacheward_state_requests_total{outcome="recomputed"} ${c.recomputed}`,
      `cacheward_state_requests_total{outcome="not_committed"} ${c.notCommitted}`,
      "# HELP cacheward_state_cached_total Requests resolved on this proxy's tracked copy, with no read from Redis.",
      '# TYPE cacheward_state_cached_total counter',
      `cacheward_state_cached_total ${c.cached}`,
      '# HELP cacheward_state_invalidations_total Keys Redis said another proxy wrote (tracked copies dropped).',
      '# TYPE cacheward_state_invalidations_total counter',
      `cacheward_state_invalidations_total ${this.cache.counts.invalidations}`,
      '# HELP cacheward_state_outages_total Times the shared state became unreachable.',
      '# TYPE cacheward_state_outages_total counter',
      `cacheward_state_outages_total ${this.liveness.outages}`,
      '# HELP cacheward_state_feed_records_total Records of the fleet feed the live analysis shares, by outcome.',
      '# TYPE cacheward_state_feed_records_total counter',
      ...Object.entries(this.feed.health()).flatMap(([k, n]) =>
        k === 'waiting'
          ? []
          : [
              `cacheward_state_feed_records_total{outcome="${k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)}"} ${n}`,
            ],
      ),
      '# HELP cacheward_state_up 1 when the shared state answers and takes writes, 0 during an outage.',
      '# TYPE cacheward_state_up gauge',
      `cacheward_state_up ${this.health().status === 'ok' ? 1 : 0}`,
      '',
    ].join('\n');
  }

  async close(): Promise<void> {
    this.closing = true;
    await this.feed.close();
    if (this.heartbeat) clearInterval(this.heartbeat);
    if (this.redis.status === 'ready') {
      if (this.member) await this.redis.zrem(`${this.prefix}instances`, this.member).catch(() => {});
      await this.redis.quit().catch(() => {});
    }
    this.redis.disconnect();
    if (this.sub?.status === 'ready') await this.sub.quit().catch(() => {});
    this.sub?.disconnect();
  }

  /**
   * Loads what resolving `request` and committing it read, resolving on the view until nothing it read is
   * missing. A conversation whose version moves between two loads means the state changed under the
   * reads: start again (three times at most).
   */
  private async resolveFresh(
    request: TrackedRequest['request'],
    wantFix: boolean,
  ): Promise<Loaded | typeof CONFLICT> {
    const walk: string[] = [];
    for (let i = request.ends.length - 1; i >= 0; i--)
      walk.push((request.ends[i] as { transcript: string }).transcript);
    for (let attempt = 0; attempt < 3; attempt++) {
      const mark = this.cache.mark();
      const loaded = emptyLoadedState();
      const fix: FixLoad = { docs: new Map(), parts: new Map() };
      const have =
        wantFix && request.label !== undefined
          ? (this.labelParts.get(request.label) ?? []).filter((h) => this.parts.get(h))
          : [];
      // Beside the first load under a label (a plain command: Redis spares this proxy its invalidation),
      // a write that tells every other proxy its copy of the label is no longer to be trusted.
      if (request.label !== undefined && attempt === 0 && this.sub)
        this.liveness
          .watch(this.redis.set(`${this.prefix}t:${request.label}`, '1', 'EX', 3600))
          .catch(() => {});
      this.absorb(
        await this.liveness.watch(
          this.scripts.cwLoad(
            ...loadArgs(this.prefix, {
              walk,
              wantFix,
              have,
              // The key of its last message, which its commit appends it to (conversation/reply-keys).
              ...(request.last !== undefined ? { e: [request.last] } : {}),
              ...(request.label !== undefined ? { label: request.label } : {}),
            }),
          ),
        ),
        loaded,
        fix,
      );
      let moved = false;
      for (let round = 0; round < 8 && !moved; round++) {
        const view = new ConversationView(loaded);
        const resolution = resolveConversation(view, request);
        const dry = new ConversationView(loaded);
        commitConversation(dry, request, resolution);
        const missing = unionMissing(view.missing, dry.missing);
        const parent = resolution.parent;
        const needFix = wantFix && parent !== undefined && !fix.docs.has(parent);
        const doc = wantFix && parent !== undefined ? fix.docs.get(parent) : undefined;
        const needParts = doc ? this.missingParts(doc, fix) : [];
        if (missingCount(missing) === 0 && !needFix && needParts.length === 0)
          return { loaded, fix, resolution, mark };
        const more = emptyLoadedState();
        const spec: LoadSpec = {
          r: [...missing.requests],
          c: [...missing.conversations],
          e: [...missing.endings],
          p: [...missing.passing],
          l: [...missing.labels],
          ...(needFix && parent ? { f: [parent], have } : {}),
          ...(needParts.length ? { s: needParts } : {}),
        };
        this.absorb(
          await this.liveness.watch(this.scripts.cwLoad(...loadArgs(this.prefix, spec))),
          more,
          fix,
        );
        moved = versionsDisagree(loaded, more);
        mergeLoaded(loaded, more);
      }
      if (!moved) throw new Error('the conversation state did not settle in 8 reads');
    }
    return CONFLICT;
  }

  /** The parts a fix document names that are neither decoded here nor in what was loaded. */
  private missingParts(doc: string, fix: FixLoad): string[] {
    try {
      return [...partsOf(doc).values()].filter((h) => !this.parts.get(h) && !fix.parts.get(h));
    } catch {
      return []; // a bad document: decoding it says so, and the request goes out unfixed
    }
  }

  private absorb(reply: string[], into: LoadedState, fix: FixLoad): void {
    const j = JSON.parse(reply[0] ?? '{}') as {
      r?: Record<string, string | false>;
      c?: Record<string, string | false>;
      v?: Record<string, number>;
      e?: Record<string, string[] | Record<string, never>>;
      p?: Record<string, string | false>;
      l?: Record<string, string | false>;
    };
    for (const [k, v] of Object.entries(j.r ?? {})) into.requests.set(k, v === false ? null : JSON.parse(v));
    for (const [k, v] of Object.entries(j.c ?? {}))
      into.conversations.set(k, v === false ? null : JSON.parse(v));
    for (const [k, v] of Object.entries(j.v ?? {})) into.versions.set(k, v);
    for (const [k, v] of Object.entries(j.e ?? {})) into.endings.set(k, Array.isArray(v) ? v : []);
    for (const [k, v] of Object.entries(j.p ?? {}))
      into.passing.set(k, v === false ? null : unpackPassing(v));
    for (const [k, v] of Object.entries(j.l ?? {})) into.labels.set(k, v === false ? null : v);
    for (let i = 1; i + 2 < reply.length; i += 3) {
      const [tag, key, value] = [reply[i], reply[i + 1] as string, reply[i + 2] as string];
      if (tag === 'f') fix.docs.set(key, value);
      else if (value) fix.parts.set(key, value);
    }
  }

  private failOpen(reason: StateUnavailable['reason'], detail: string): StateUnavailable {
    this.counts.failedOpen++;
    if (this.liveness.outage) this.liveness.unfixed++;
    this.lastFailOpen = { at: Date.now(), reason: detail };
    return { ok: false, reason, detail };
  }

  /** Why Redis is out, as a request's record says it. */
  private outReason(): string {
    return this.liveness.outage?.reason ?? `Redis at ${this.options.spec.display} is out`;
  }

  private notCommitted(why: string): StateCommit {
    this.counts.notCommitted++;
    return {
      outcome: 'not-committed',
      note: {
        fix: 'state',
        changed: false,
        notes: [`this turn is not in the shared state: ${why}`],
      },
    };
  }
}

function unionMissing(a: MissingKeys, b: MissingKeys): MissingKeys {
  return {
    requests: new Set([...a.requests, ...b.requests]),
    conversations: new Set([...a.conversations, ...b.conversations]),
    endings: new Set([...a.endings, ...b.endings]),
    passing: new Set([...a.passing, ...b.passing]),
    labels: new Set([...a.labels, ...b.labels]),
  };
}
