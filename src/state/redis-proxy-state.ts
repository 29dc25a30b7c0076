// The fleet's state on Redis: before a request's fixes run, one script loads what the resolver and the
// commit will read into a ConversationView; the commit is a compare-and-swap on conversation versions.
// It never holds a request longer than its budget and never alters one: late or down means fail open.

import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { Redis } from 'ioredis';
import { commitConversation, resolveConversation } from '../conversation/resolve-conversation.js';
import type { HeaderLookup } from '../conversation/session-label.js';
import type { Prefix } from '../prefix/build-prefix.js';
import {
  ConversationTracker,
  conversationRequest,
  countsAsTurn,
  type TrackedRequest,
} from '../proxy/conversation-tracker.js';
import {
  ConversationView,
  emptyLoadedState,
  type LoadedState,
  type MissingKeys,
  mergeLoaded,
  missingCount,
  versionsDisagree,
} from './conversation-view.js';
import { decodeFixState, encodeFixState, type RequestFixState } from './fix-state-codec.js';
import type {
  PreparedRequest,
  PrepareResult,
  ProxyState,
  StateCommit,
  StateHealth,
  StateUnavailable,
} from './proxy-state.js';
import { COMMIT_SCRIPT, HEARTBEAT_SCRIPT, LOAD_SCRIPT } from './redis-scripts.js';
import type { StateSpec } from './state-url.js';
import { LATE, withinBudget } from './within-budget.js';

export interface RedisProxyStateOptions {
  spec: Extract<StateSpec, { kind: 'redis' }>;
  /** Every key starts with it. Default `cacheward:`. */
  prefix?: string;
  /** The most a request waits for state before it goes out unfixed (ms). Default 50. */
  budgetMs?: number;
  /** How often this proxy says it is alive (ms). Default 1,000; an instance silent for 3× is gone. */
  heartbeatMs?: number;
  log?: (line: string) => void;
}

/** Keys live this long after their last write: the longest cache TTL they can matter for, and a margin. */
export function stateTtlSeconds(prefix: Prefix): number {
  const retention = prefix.body.fields.prompt_cache_retention;
  return retention === '24h' ? 25 * 3600 : 75 * 60;
}

interface ScriptClient {
  cwLoad(prefix: string, spec: string): Promise<string[]>;
  cwCommit(
    prefix: string,
    ttl: string,
    writes: string,
    id: string,
    fixDoc: string,
  ): Promise<[number, string?]>;
  cwHeartbeat(key: string, member: string, windowMs: string): Promise<[number, string[]]>;
}

interface LoadSpec {
  walk?: string[];
  label?: string;
  nofix?: boolean;
  r?: string[];
  c?: string[];
  e?: string[];
  p?: string[];
  l?: string[];
  f?: string[];
}

interface Loaded {
  loaded: LoadedState;
  fixDocs: Map<string, string>;
  resolution: TrackedRequest['resolution'];
}

interface Inner {
  loaded: LoadedState;
  ttl: number;
}

const CONFLICT = Symbol('conflict');

export class RedisProxyState implements ProxyState {
  readonly kind = 'redis' as const;
  readonly local = new ConversationTracker();
  private readonly redis: Redis;
  private readonly scripts: ScriptClient;
  private readonly prefix: string;
  private readonly budgetMs: number;
  private readonly heartbeatMs: number;
  private readonly log: (line: string) => void;
  private readonly instanceId = `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
  private readonly inner = new WeakMap<PreparedRequest, Inner>();
  private heartbeat: NodeJS.Timeout | undefined;
  private member: string | undefined;
  private closing = false;
  private instances: StateHealth['instances'] = [];
  private failing: { at: number; reason: string } | undefined;
  private lastFailure: { at: number; reason: string } | undefined;
  private recoveredAt: number | undefined;
  private readonly counts = {
    prepared: 0,
    failedOpen: 0,
    committed: 0,
    recomputed: 0,
    notCommitted: 0,
    outages: 0,
  };

  private constructor(private readonly options: RedisProxyStateOptions) {
    this.prefix = options.prefix ?? 'cacheward:';
    this.budgetMs = options.budgetMs ?? 50;
    this.heartbeatMs = options.heartbeatMs ?? 1_000;
    this.log = options.log ?? (() => {});
    const s = options.spec;
    this.redis = new Redis({
      host: s.host,
      port: s.port,
      db: s.db,
      ...(s.username ? { username: s.username } : {}),
      ...(s.password ? { password: s.password } : {}),
      ...(s.tls ? { tls: {} } : {}),
      lazyConnect: true,
      // A command while Redis is away fails at once (the request goes out unfixed), never queues.
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: Math.max(1_000, this.budgetMs * 20),
      connectTimeout: 1_000,
      retryStrategy: (times) => Math.min(50 * times, 500),
    });
    this.redis.defineCommand('cwLoad', { numberOfKeys: 0, lua: LOAD_SCRIPT });
    this.redis.defineCommand('cwCommit', { numberOfKeys: 0, lua: COMMIT_SCRIPT });
    this.redis.defineCommand('cwHeartbeat', { numberOfKeys: 1, lua: HEARTBEAT_SCRIPT });
    this.scripts = this.redis as unknown as ScriptClient;
    this.redis.on('error', (err: Error) => this.failed(`Redis at ${s.display}: ${err.message}`));
    this.redis.on('close', () => {
      if (!this.closing) this.failed(`Redis at ${s.display} closed the connection`);
    });
    this.redis.on('ready', () => this.succeeded());
  }

  /** Connects (waiting at most `waitMs`); a Redis that is not there yet leaves the proxy degraded, not stopped. */
  static async connect(options: RedisProxyStateOptions, waitMs = 2_000): Promise<RedisProxyState> {
    const state = new RedisProxyState(options);
    const ready = state.redis.connect().then(
      () => true,
      (err: Error) => {
        state.failed(`Redis at ${options.spec.display}: ${err.message}`);
        return false;
      },
    );
    const r = await withinBudget(ready, waitMs);
    if (r !== true)
      state.log(
        `state: Redis at ${options.spec.display} is not answering; requests go out unfixed until it does`,
      );
    return state;
  }

  async prepare(id: string, prefix: Prefix, headers: HeaderLookup, time: number): Promise<PrepareResult> {
    const { label, request } = conversationRequest(id, prefix, headers, time);
    if (this.redis.status !== 'ready')
      return this.failOpen('unavailable', `Redis at ${this.options.spec.display} is ${this.redis.status}`);
    const work = this.resolveFresh(request, true).catch((err: Error) => err);
    const out = await withinBudget(work, this.budgetMs);
    if (out === LATE) return this.failOpen('unavailable', `no answer from Redis within ${this.budgetMs} ms`);
    if (out === CONFLICT)
      return this.failOpen('conflict', 'the conversation changed on every read (3 attempts)');
    if (out instanceof Error) return this.failOpen('unavailable', `Redis: ${out.message}`);
    this.succeeded();
    const parent = out.resolution.parent;
    let fix: RequestFixState | undefined;
    const doc = parent ? out.fixDocs.get(parent) : undefined;
    if (doc) {
      try {
        fix = decodeFixState(doc);
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
    this.inner.set(prepared, { loaded: out.loaded, ttl: stateTtlSeconds(prefix) });
    this.counts.prepared++;
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
    const fixDoc = after ? encodeFixState(after) : '';
    const { id } = p.tracked.request;
    let lostOn: string | undefined;
    try {
      for (let attempt = 0; attempt < 4; attempt++) {
        const view = new ConversationView(inner.loaded);
        commitConversation(view, p.tracked.request, p.tracked.resolution);
        const w = view.writes();
        const writes = JSON.stringify({
          checks: w.checks,
          r: w.requests.map((n) => [n.id, JSON.stringify(n)]),
          c: w.conversations.map((c) => [c.id, JSON.stringify(c)]),
          e: w.endings,
          p: w.passing.map(([t, e]) => [t, JSON.stringify(e)]),
          l: w.labels,
        });
        const r = await this.scripts.cwCommit(this.prefix, String(inner.ttl), writes, id, fixDoc);
        this.succeeded();
        if (r[0] === 1) {
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
        lostOn = r[1] ?? '?';
        const again = await this.resolveFresh(p.tracked.request, false);
        if (again === CONFLICT) break;
        inner.loaded = again.loaded;
        p.tracked.resolution = again.resolution;
      }
      return this.notCommitted(`it lost the compare-and-swap on conversation ${lostOn} four times`);
    } catch (err) {
      this.failed(`Redis: ${(err as Error).message}`);
      return this.notCommitted(`Redis failed: ${(err as Error).message}`);
    }
  }

  async track(
    id: string,
    prefix: Prefix,
    headers: HeaderLookup,
    time: number,
    route: string,
    status: number | undefined,
  ): Promise<TrackedRequest | undefined> {
    if (this.redis.status !== 'ready') return undefined;
    const { label, request } = conversationRequest(id, prefix, headers, time);
    try {
      const out = await this.resolveFresh(request, false);
      if (out === CONFLICT) return undefined;
      const tracked: TrackedRequest = { label, request, resolution: out.resolution, committed: false };
      const prepared: PreparedRequest = { ok: true, tracked, states: undefined, parentPair: undefined };
      this.inner.set(prepared, { loaded: out.loaded, ttl: stateTtlSeconds(prefix) });
      const c = await this.commit(prepared, route, status, undefined);
      return c.outcome === 'not-committed' ? undefined : tracked;
    } catch (err) {
      this.failed(`Redis: ${(err as Error).message}`);
      return undefined;
    }
  }

  started(url: string): void {
    if (this.heartbeat) return;
    const member = JSON.stringify({ id: this.instanceId, url, pid: process.pid });
    this.member = member;
    const beat = () => {
      if (this.redis.status !== 'ready') return;
      this.scripts
        .cwHeartbeat(`${this.prefix}instances`, member, String(this.heartbeatMs * 3))
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
          this.succeeded();
        })
        .catch((err: Error) => this.failed(`Redis: ${err.message}`));
    };
    beat();
    this.heartbeat = setInterval(beat, this.heartbeatMs);
    this.heartbeat.unref();
  }

  health(): StateHealth {
    const down = this.redis.status !== 'ready' || this.failing !== undefined;
    return {
      kind: 'redis',
      status: down ? 'degraded' : 'ok',
      url: this.options.spec.display,
      prefix: this.prefix,
      budgetMs: this.budgetMs,
      failedOpen: this.counts.failedOpen,
      ...(this.lastFailure
        ? {
            lastFailure: { at: new Date(this.lastFailure.at).toISOString(), reason: this.lastFailure.reason },
          }
        : {}),
      outages: this.counts.outages,
      ...(this.recoveredAt ? { recoveredAt: new Date(this.recoveredAt).toISOString() } : {}),
      recomputed: this.counts.recomputed,
      notCommitted: this.counts.notCommitted,
      instances: down ? [] : this.instances,
      instance: this.instanceId,
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
      '# HELP cacheward_state_outages_total Times the shared state became unreachable.',
      '# TYPE cacheward_state_outages_total counter',
      `cacheward_state_outages_total ${c.outages}`,
      '# HELP cacheward_state_up 1 when the shared state answers, 0 while requests go out unfixed.',
      '# TYPE cacheward_state_up gauge',
      `cacheward_state_up ${this.health().status === 'ok' ? 1 : 0}`,
      '',
    ].join('\n');
  }

  async close(): Promise<void> {
    this.closing = true;
    if (this.heartbeat) clearInterval(this.heartbeat);
    if (this.redis.status === 'ready') {
      if (this.member) await this.redis.zrem(`${this.prefix}instances`, this.member).catch(() => {});
      await this.redis.quit().catch(() => {});
    }
    this.redis.disconnect();
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
      const loaded = emptyLoadedState();
      const fixDocs = new Map<string, string>();
      this.absorb(
        await this.scripts.cwLoad(
          this.prefix,
          JSON.stringify({
            walk,
            ...(request.label !== undefined ? { label: request.label } : {}),
            ...(wantFix ? {} : { nofix: true }),
          } satisfies LoadSpec),
        ),
        loaded,
        fixDocs,
      );
      let moved = false;
      for (let round = 0; round < 8 && !moved; round++) {
        const view = new ConversationView(loaded);
        const resolution = resolveConversation(view, request);
        const dry = new ConversationView(loaded);
        commitConversation(dry, request, resolution);
        const missing = unionMissing(view.missing, dry.missing);
        const needFix = wantFix && resolution.parent !== undefined && !fixDocs.has(resolution.parent);
        if (missingCount(missing) === 0 && !needFix) return { loaded, fixDocs, resolution };
        const more = emptyLoadedState();
        const spec: LoadSpec = {
          r: [...missing.requests],
          c: [...missing.conversations],
          e: [...missing.endings],
          p: [...missing.passing],
          l: [...missing.labels],
          ...(needFix && resolution.parent ? { f: [resolution.parent] } : {}),
        };
        this.absorb(await this.scripts.cwLoad(this.prefix, JSON.stringify(spec)), more, fixDocs);
        moved = versionsDisagree(loaded, more);
        mergeLoaded(loaded, more);
      }
      if (!moved) throw new Error('the conversation state did not settle in 8 reads');
    }
    return CONFLICT;
  }

  private absorb(reply: string[], into: LoadedState, fixDocs: Map<string, string>): void {
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
    for (const [k, v] of Object.entries(j.p ?? {})) into.passing.set(k, v === false ? null : JSON.parse(v));
    for (const [k, v] of Object.entries(j.l ?? {})) into.labels.set(k, v === false ? null : v);
    for (let i = 1; i + 1 < reply.length; i += 2) fixDocs.set(reply[i] as string, reply[i + 1] as string);
  }

  private failOpen(reason: StateUnavailable['reason'], detail: string): StateUnavailable {
    this.counts.failedOpen++;
    if (reason === 'unavailable') this.failed(detail);
    else this.lastFailure = { at: Date.now(), reason: detail };
    return { ok: false, reason, detail };
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

  private failed(reason: string): void {
    const now = Date.now();
    this.lastFailure = { at: now, reason };
    if (this.failing) return;
    this.failing = { at: now, reason };
    this.counts.outages++;
    this.log(`state degraded (requests go out unfixed, nothing is lost): ${reason}`);
  }

  private succeeded(): void {
    if (!this.failing || this.redis.status !== 'ready') return;
    const since = this.failing.at;
    this.failing = undefined;
    this.recoveredAt = Date.now();
    this.log(`state: Redis answers again after ${((this.recoveredAt - since) / 1000).toFixed(1)} s`);
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
