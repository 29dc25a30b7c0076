// The fleet's feed of finished exchanges: a Redis stream under the state prefix that every proxy appends its
// capture records to and reads whole, so each proxy's live analysis runs on the traffic the merged report
// reads and counts only what it served. Records go without bodies (no text in any mode), a prefix as a delta
// from its session's previous record. It never touches traffic: it runs after responses, and a record it
// cannot publish (Redis out) is analyzed by its own proxy alone.

import type { Redis } from 'ioredis';
import { LruMap } from '../core/lru-map.js';
import {
  applyBlockDelta,
  blockDelta,
  type CapturedBlock,
  type CapturedPrefix,
  type CaptureRecord,
} from '../record/capture-record.js';
import { ParentFirst } from './parent-first.js';
import type { LiveFeed, LiveFeedHealth } from './proxy-state.js';
import type { RedisLiveness } from './redis-liveness.js';

export interface RedisLiveFeedOptions {
  /** The data connection, which publishes (the reader is a copy of it). */
  redis: Redis;
  liveness: RedisLiveness;
  /** The stream's key (under the state prefix). */
  key: string;
  /** This proxy's id, carried by the records it publishes. */
  instance: string;
  /** Records the stream keeps (about; older ones are trimmed). Default 10,000. */
  maxLen?: number;
  /** How long a record waits for its parent to come first (ms after its exchange ended). Default 3,000. */
  parentWaitMs?: number;
  log: (line: string) => void;
}

/** A record whose blocks later records of its session may be stored against. */
interface Base {
  id: string;
  blocks: CapturedBlock[];
  /** How many deltas it took to rebuild (a chain this long is broken by a record sent whole). */
  depth: number;
}

const MAX_DEPTH = 16;
/** Records kept per session as bases (a session's requests may arrive from several proxies at once). */
const PER_SESSION = 3;
/** Sessions kept, and block references across them (a base's blocks are mostly its session's next's too). */
const MAX_SESSIONS = 2_048;
const MAX_BLOCKS = 1_000_000;

/** A record as the feed carries it: no bodies, and its prefix perhaps a delta (`base`, as on disk). */
type FeedRecord = Omit<CaptureRecord, 'body' | 'clientBody'>;

export class RedisLiveFeed implements LiveFeed {
  private reader: Redis | undefined;
  private running = false;
  private lastId = '0';
  private readonly sessions = new LruMap<Base[]>(MAX_SESSIONS, (_k, kept) => this.forget(kept));
  private blocksHeld = 0;
  private readonly order: ParentFirst<{ record: CaptureRecord; own: boolean }>;
  private delivering: Promise<void> = Promise.resolve();
  private deliver: ((record: CaptureRecord, own: boolean) => Promise<void>) | undefined;
  private readonly counts = { published: 0, notPublished: 0, received: 0, own: 0, unreadable: 0 };

  constructor(private readonly options: RedisLiveFeedOptions) {
    this.order = new ParentFirst(({ record, own }) => {
      const deliver = this.deliver;
      if (!deliver) return;
      this.delivering = this.delivering.then(() => deliver(record, own)).catch(() => {});
    });
  }

  async publish(record: CaptureRecord): Promise<boolean> {
    const o = this.options;
    if (o.redis.status !== 'ready' || o.liveness.unreachable) {
      this.counts.notPublished++;
      return false;
    }
    try {
      const text = JSON.stringify(this.encode(record));
      await o.liveness.watch(
        o.redis.xadd(o.key, 'MAXLEN', '~', String(o.maxLen ?? 10_000), '*', 'i', o.instance, 'r', text),
      );
      this.counts.published++;
      return true;
    } catch {
      this.counts.notPublished++;
      return false;
    }
  }

  start(deliver: (record: CaptureRecord, own: boolean) => Promise<void>): void {
    if (this.running) return;
    this.running = true;
    this.deliver = deliver;
    // A connection of its own: it waits on the stream (XREAD BLOCK), which would hold up every other command.
    const reader = this.options.redis.duplicate({
      lazyConnect: true,
      enableOfflineQueue: false,
      commandTimeout: 5_000,
    });
    reader.on('error', () => {});
    this.reader = reader;
    void this.loop(reader);
  }

  health(): LiveFeedHealth {
    return { ...this.counts, waiting: this.order.held };
  }

  async close(): Promise<void> {
    this.running = false;
    this.order.drain();
    const r = this.reader;
    this.reader = undefined;
    r?.disconnect();
    await this.delivering;
  }

  private async loop(reader: Redis): Promise<void> {
    await reader.connect().catch(() => {});
    while (this.running) {
      try {
        if (reader.status !== 'ready') {
          await new Promise((r) => setTimeout(r, 250));
          continue;
        }
        const reply = (await reader.xread(
          'COUNT',
          200,
          'BLOCK',
          1_000,
          'STREAMS',
          this.options.key,
          this.lastId,
        )) as Array<[string, Array<[string, string[]]>]> | null;
        for (const [, entries] of reply ?? [])
          for (const [id, fields] of entries) {
            this.lastId = id;
            this.receive(fields);
          }
        // Read no further ahead than the analysis keeps up with.
        await this.delivering;
      } catch {
        if (this.running) await new Promise((r) => setTimeout(r, 250));
      }
    }
  }

  private receive(fields: string[]): void {
    let instance: string | undefined;
    let text: string | undefined;
    for (let i = 0; i + 1 < fields.length; i += 2) {
      if (fields[i] === 'i') instance = fields[i + 1];
      else if (fields[i] === 'r') text = fields[i + 1];
    }
    this.counts.received++;
    const record = text === undefined ? undefined : this.decode(text);
    if (!record) {
      this.counts.unreadable++;
      return;
    }
    const own = instance === this.options.instance;
    if (own) this.counts.own++;
    const ended = record.times.end ?? record.times.start;
    this.order.add(
      { record, own },
      record.id,
      record.conversation?.parent,
      ended + (this.options.parentWaitMs ?? 3_000),
    );
  }

  /** The record without its bodies, and its prefix as a delta from its session's latest record here. */
  private encode(record: CaptureRecord): FeedRecord {
    const { body: _body, clientBody: _client, ...rest } = record;
    const prefix = record.prefix;
    const base = prefix && this.sessions.peek(record.session.key)?.at(-1);
    if (!prefix || !base || base.depth >= MAX_DEPTH) return rest;
    const { shared, moved } = blockDelta(prefix.blocks, base.blocks);
    if (shared === 0) return rest;
    const delta: NonNullable<CapturedPrefix['base']> = moved.length
      ? { id: base.id, shared, moved }
      : { id: base.id, shared };
    return { ...rest, prefix: { ...prefix, base: delta, blocks: prefix.blocks.slice(shared) } };
  }

  /** A record as read, its blocks rebuilt from its base; undefined when it cannot be (its base is gone). */
  private decode(text: string): CaptureRecord | undefined {
    let record: CaptureRecord;
    try {
      record = JSON.parse(text) as CaptureRecord;
    } catch {
      return undefined;
    }
    if (typeof record?.id !== 'string' || typeof record.session?.key !== 'string' || !record.times)
      return undefined;
    const prefix = record.prefix;
    if (!prefix) return record;
    const kept = this.sessions.get(record.session.key) ?? [];
    let depth = 0;
    if (prefix.base) {
      const base = kept.find((b) => b.id === prefix.base?.id);
      if (!base) return undefined;
      prefix.blocks = applyBlockDelta(base.blocks, prefix.base, prefix.blocks).blocks;
      delete prefix.base;
      depth = base.depth + 1;
    }
    kept.push({ id: record.id, blocks: prefix.blocks, depth });
    this.blocksHeld += prefix.blocks.length;
    if (kept.length > PER_SESSION) this.forget(kept.splice(0, 1));
    this.sessions.set(record.session.key, kept);
    for (let oldest = this.sessions.first(); this.blocksHeld > MAX_BLOCKS && oldest; ) {
      this.sessions.delete(oldest[0]);
      this.forget(oldest[1]);
      oldest = this.sessions.first();
    }
    return record;
  }

  private forget(bases: readonly Base[]): void {
    for (const b of bases) this.blocksHeld -= b.blocks.length;
  }
}
