// The fleet's live feed against a real redis-server: what one proxy publishes every proxy reads whole and
// in one order, a prefix travels as a delta from its session's previous record and arrives whole, a record
// comes after the parent the shared state named for it, one whose base is gone is counted unreadable, and
// nothing is published while Redis is out. ParentFirst on its own: held for its parent, never past its time.

import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PrefixBuilder } from '../../src/prefix/build-prefix.js';
import { type CaptureRecord, capturePrefix } from '../../src/record/capture-record.js';
import { agentConversation, appendUserTurn } from '../../src/sim/agent-conversation.js';
import { ParentFirst } from '../../src/state/parent-first.js';
import { RedisLiveFeed } from '../../src/state/redis-live-feed.js';
import { RedisLiveness } from '../../src/state/redis-liveness.js';
import { type RedisServer, startRedis } from './redis-server.js';

const builder = new PrefixBuilder();

/** Turn `n` (1-based) of one growing agent conversation, as the proxy records it. */
function recordOf(id: string, n: number, parent?: string): CaptureRecord {
  let body = agentConversation({ turns: 2, seed: 11 });
  for (let t = 1; t < n; t++) body = appendUserTurn(body, `step ${t}`);
  const prefix = builder.parse(JSON.stringify(body), { format: 'anthropic-messages' });
  const now = Date.now();
  return {
    v: 1,
    id,
    times: { start: now - 20, end: now },
    session: { key: 'feed-session', source: 'header' },
    conversation: {
      id: 'c-1',
      relation: parent ? 'continues' : 'new',
      turn: n,
      ...(parent ? { parent } : {}),
    },
    provider: 'anthropic',
    route: '/v1/messages',
    method: 'POST',
    outcome: 'complete',
    stream: false,
    headers: {},
    betas: [],
    requestBytes: 100,
    prefix: capturePrefix(prefix),
    fixes: [],
    body: { text: 'the client body, never to reach Redis', size: 37, sha256: 'x' },
  };
}

let redis: RedisServer;
const closers: Array<() => Promise<void> | void> = [];

/** A feed as a proxy has one: its data connection, its liveness, the stream key. */
async function feedOf(instance: string, key: string, port = redis.port) {
  const conn = new Redis({ host: '127.0.0.1', port, lazyConnect: true, enableOfflineQueue: false });
  conn.on('error', () => {});
  await conn.connect().catch(() => {});
  const liveness = new RedisLiveness({ limitMs: 1000, display: 'test', log: () => {} });
  const feed = new RedisLiveFeed({
    redis: conn,
    liveness,
    key,
    instance,
    parentWaitMs: 1_500,
    log: () => {},
  });
  const got: Array<{ record: CaptureRecord; own: boolean }> = [];
  closers.push(async () => {
    await feed.close();
    conn.disconnect();
  });
  return { feed, got, conn };
}

async function until(cond: () => boolean, ms = 5_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`condition not reached within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  for (const c of closers) await c();
  await redis?.close();
});

describe('the fleet feed', () => {
  it('brings every proxy the whole fleet’s records in one order, prefixes whole, bodies left out', async () => {
    const a = await feedOf('proxy-a', 'feed1:live');
    const b = await feedOf('proxy-b', 'feed1:live');
    for (const x of [a, b])
      x.feed.start(async (record, own) => {
        x.got.push({ record, own });
      });
    const r1 = recordOf('r1', 1);
    const r2 = recordOf('r2', 2, 'r1');
    const r3 = recordOf('r3', 3, 'r2');
    expect(await a.feed.publish(r1)).toBe(true);
    await until(() => b.got.length === 1 && a.got.length === 1);
    expect(await b.feed.publish(r2)).toBe(true);
    await until(() => a.got.length === 2);
    expect(await a.feed.publish(r3)).toBe(true);
    await until(() => a.got.length === 3 && b.got.length === 3);
    for (const x of [a, b]) expect(x.got.map((g) => g.record.id)).toEqual(['r1', 'r2', 'r3']);
    expect(a.got.map((g) => g.own)).toEqual([true, false, true]);
    expect(b.got.map((g) => g.own)).toEqual([false, true, false]);
    // Each prefix arrives whole, block for block; the body never went into Redis.
    for (const [i, r] of [r1, r2, r3].entries()) {
      const got = b.got[i]?.record as CaptureRecord;
      expect(got.prefix?.blocks).toEqual(r.prefix?.blocks);
      expect(got.prefix?.base).toBeUndefined();
      expect(got.body).toBeUndefined();
    }
    // On the stream the later turns are deltas: only their new blocks travel.
    const entries = (await a.conn.xrange('feed1:live', '-', '+')) as Array<[string, string[]]>;
    const stored = entries.map(([, f]) => JSON.parse(f[f.indexOf('r') + 1] as string) as CaptureRecord);
    expect(stored[0]?.prefix?.base).toBeUndefined();
    expect(stored[1]?.prefix?.base).toMatchObject({ id: 'r1' });
    expect(stored[2]?.prefix?.base).toMatchObject({ id: 'r2' });
    expect(stored[2]?.prefix?.blocks.length).toBeLessThan((r3.prefix?.blocks.length ?? 0) / 2);
    expect(a.feed.health()).toMatchObject({ published: 2, received: 3, own: 2, unreadable: 0, waiting: 0 });
  });

  it('hands a record on after the parent the shared state named, even when the parent is published later', async () => {
    const a = await feedOf('proxy-a', 'feed2:live');
    a.feed.start(async (record) => {
      a.got.push({ record, own: true });
    });
    const r1 = recordOf('p1', 1);
    const r2 = recordOf('p2', 2, 'p1');
    const r3 = recordOf('p3', 3, 'p2');
    await a.feed.publish(r1);
    await until(() => a.got.length === 1);
    // p3's proxy was quicker than p2's: p3 is on the stream first, and waits.
    await a.feed.publish(r3);
    await until(() => a.feed.health().received === 2);
    expect(a.feed.health().waiting).toBe(1);
    await a.feed.publish(r2);
    await until(() => a.got.length === 3);
    expect(a.got.map((g) => g.record.id)).toEqual(['p1', 'p2', 'p3']);
    // A parent that never comes holds its child only until its time is up.
    const orphan = recordOf('p5', 5, 'p4');
    await a.feed.publish(orphan);
    await until(() => a.got.length === 4, 5_000);
    expect(a.got[3]?.record.id).toBe('p5');
  });

  it('counts a record whose base it never had as unreadable, and publishes nothing while Redis is out', async () => {
    const a = await feedOf('proxy-a', 'feed3:live');
    a.feed.start(async (record) => {
      a.got.push({ record, own: false });
    });
    const r = recordOf('u2', 2);
    const stray = { ...r, prefix: { ...r.prefix, base: { id: 'gone', shared: 3 } } };
    await a.conn.xadd('feed3:live', '*', 'i', 'other', 'r', JSON.stringify(stray));
    await a.conn.xadd('feed3:live', '*', 'i', 'other', 'r', 'not json');
    await until(() => a.feed.health().received === 2);
    expect(a.feed.health()).toMatchObject({ unreadable: 2 });
    expect(a.got).toHaveLength(0);
    const down = await feedOf('proxy-d', 'feed3:live', 1);
    expect(await down.feed.publish(recordOf('d1', 1))).toBe(false);
    expect(down.feed.health()).toMatchObject({ published: 0, notPublished: 1 });
  });
});

describe('ParentFirst', () => {
  it('holds a record until its parent has gone, and goes on at its deadline when the parent does not come', async () => {
    const out: string[] = [];
    const order = new ParentFirst<string>((x) => out.push(x), { sweepMs: 10 });
    const later = Date.now() + 60_000;
    order.add('b', 'b', 'a', later);
    order.add('c', 'c', 'b', later);
    expect(out).toEqual([]);
    expect(order.held).toBe(2);
    order.add('a', 'a', undefined, later);
    expect(out).toEqual(['a', 'b', 'c']);
    order.add('y', 'y', 'x', Date.now() + 30);
    await until(() => out.length === 4);
    expect(out[3]).toBe('y');
    expect(order.held).toBe(0);
    // A parent handed on long ago lets its child through at once; so does a record whose time is up.
    order.add('a2', 'a2', 'a', later);
    order.add('z', 'z', 'unknown', Date.now() - 1);
    expect(out.slice(4)).toEqual(['a2', 'z']);
  });
});
