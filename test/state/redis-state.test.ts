// The Redis state against a real redis-server: it resolves every conversation shape exactly as the memory
// state does (from Redis or from its tracked copy), another instance's read or write drops that copy before
// the next request uses it, two instances racing on one conversation never tear it (the loser
// recomputes), a slow or stopped Redis fails open within the budget and state resumes after, and every
// key expires.

import { createServer, connect as netConnect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { longestCacheTtlMs } from '../../src/cache/longest-ttl.js';
import { openaiDefaultRetention } from '../../src/cache/openai-rules.js';
import { PrefixBuilder } from '../../src/prefix/build-prefix.js';
import { messageEnds } from '../../src/prefix/message-ends.js';
import type { FixStates } from '../../src/state/fix-state-store.js';
import { MemoryProxyState } from '../../src/state/memory-proxy-state.js';
import type { PreparedRequest, ProxyState } from '../../src/state/proxy-state.js';
import { RedisProxyState } from '../../src/state/redis-proxy-state.js';
import { parseStateSpec, StateConfigError } from '../../src/state/state-url.js';
import { type RedisServer, startRedis } from './redis-server.js';

type Msg = { role: string; content: string };
const TOOLS = [
  { name: 'read', description: 'Read a file', input_schema: { type: 'object', properties: {} } },
  { name: 'bash', description: 'Run a command', input_schema: { type: 'object', properties: {} } },
];
const u = (content: string): Msg => ({ role: 'user', content });
const a = (content: string): Msg => ({ role: 'assistant', content });

interface Step {
  messages: Msg[];
  label?: string;
  tools?: object[];
  system?: string;
  retention?: '24h';
}

/** Every shape the resolver knows, in one traffic: continues, sibling, forks, the main line returning, edits, retries, strangers. */
function scenario(): Step[] {
  const h = [u('fix the bug'), a('looking'), u('here is the file')];
  return [
    { messages: [u('fix the bug')], label: 's' },
    { messages: h, label: 's' },
    { messages: [u('search the repo for X')], label: 's', system: 'You are a search subagent.' },
    { messages: [...h, a('tested'), u('review the change')], label: 's', tools: [TOOLS[0] as object] },
    { messages: [...h, a('tested'), u('all green, ship it')], label: 's' },
    { messages: [...h, a('tested'), u('all green, ship it'), a('shipped'), u('done?')], label: 's' },
    { messages: [...h, a('tested'), u('all green, ship it'), a('shipped'), u('done?')], label: 's' },
    { messages: [...h, a('tested'), u('review it again')], label: 's', tools: [TOOLS[0] as object] },
    { messages: [...h, a('tested'), u('review as a stranger')], label: 'review-agent' },
    { messages: [u('fix the bug'), a('looking'), u('here is the file, edited')], label: 's' },
    { messages: [u('task A')] },
    { messages: [u('task B')] },
    { messages: [u('task A'), a('ok A'), u('more A')] },
    { messages: [u('task B'), a('ok B'), u('more B')] },
    { messages: [u('<date>monday</date> go'), a('ok'), u('next')], label: 'd' },
    { messages: [u('<date>tuesday</date> go'), a('ok'), u('next'), a('done'), u('more')], label: 'd' },
    { messages: [u('one'), a('two'), u('three')], label: 'r', retention: '24h' },
    { messages: [u('one'), a('two'), u('three'), a('four'), u('five')], label: 'r', retention: '24h' },
    {
      messages: [u('one'), a('two'), u('three'), a('four'), u('five, better')],
      label: 'r',
      retention: '24h',
    },
  ];
}

const builder = new PrefixBuilder();
function prefixOf(s: Step) {
  const body = JSON.stringify({
    model: 'claude-opus-5',
    max_tokens: 100,
    system: s.system ?? 'You are a coding agent.',
    tools: s.tools ?? TOOLS,
    messages: s.messages,
    ...(s.retention ? { prompt_cache_retention: s.retention } : {}),
  });
  return builder.parse(body, { format: 'anthropic-messages' });
}
/** Resolves once `cond` holds, checking on every beat of the health it reads; fails after `ms`. */
async function until(cond: () => boolean, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`condition not reached within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

const headersOf = (s: Step) => (s.label ? { 'x-cacheward-session': s.label } : {});

/** A fix state that records the chain of requests it came through: a lost or forked state shows at once. */
function afterOf(p: PreparedRequest, prefix: ReturnType<typeof prefixOf>) {
  const chain = [...((p.states?.get('chain') as string[] | undefined) ?? []), p.tracked.request.id];
  const states: FixStates = new Map([['chain', chain]]);
  return { states, pair: { client: prefix.blocks, forwarded: prefix.blocks } };
}

async function drive(state: ProxyState, steps: Step[], prefix = 'r') {
  const out = [];
  let i = 0;
  for (const s of steps) {
    const px = prefixOf(s);
    const id = `${prefix}${++i}`;
    const p = await state.prepare(id, px, headersOf(s), i * 1000);
    if (!p.ok) throw new Error(`state unavailable at step ${i}: ${p.detail}`);
    const c = await state.commit(p, '/v1/messages', 200, afterOf(p, px));
    const r = p.tracked.resolution;
    out.push({
      relation: r.relation,
      conversation: r.conversation,
      parent: r.parent,
      turn: r.turn,
      duplicate: r.duplicate,
      reclassified: r.reclassified,
      chain: p.states?.get('chain'),
      pairBlocks: p.parentPair?.forwarded.length,
      commit: c.outcome,
    });
  }
  return out;
}

/** One history of `n` user turns under a label. */
function history(n: number): Msg[] {
  const m = [u('go')];
  for (let i = 1; i < n; i++) m.push(a(`ok ${i}`), u(`next ${i}`));
  return m;
}

/**
 * What lies between two requests of a client in the real world: the response travels to it over a socket
 * and its next request to the proxy over another. Modelled by one byte echoed over loopback.
 */
async function clientHop(): Promise<void> {
  const server = createServer((c) => c.on('data', (d) => c.end(d)));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve, reject) => {
    const c = netConnect(port, '127.0.0.1', () => c.write('x'));
    c.once('data', () => {
      c.destroy();
      resolve();
    });
    c.once('error', reject);
  });
  await new Promise<void>((r) => server.close(() => r()));
}

/** A loopback relay to Redis that holds every reply back `ms` (in order): a Redis that answers late. */
async function slowRelay(redisPort: number, ms: number) {
  const sockets = new Set<import('node:net').Socket>();
  const server = createServer((client) => {
    const upstream = netConnect(redisPort, '127.0.0.1');
    sockets.add(client).add(upstream);
    client.on('data', (d) => upstream.write(d));
    upstream.on('data', (d) => {
      setTimeout(() => client.writable && client.write(d), ms);
    });
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('close', end).on('error', end);
    upstream.on('close', end).on('error', end);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as { port: number }).port,
    close: () =>
      new Promise<void>((r) => {
        for (const x of sockets) x.destroy();
        server.close(() => r());
      }),
  };
}

let redis: RedisServer;
const states: RedisProxyState[] = [];
async function redisState(prefix: string, budgetMs = 50, log?: (line: string) => void) {
  const s = await RedisProxyState.connect({
    spec: parseStateSpec(redis.url) as Extract<ReturnType<typeof parseStateSpec>, { kind: 'redis' }>,
    prefix,
    budgetMs,
    heartbeatMs: 200,
    ...(log ? { log } : {}),
  });
  states.push(s);
  return s;
}

beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  for (const s of states) await s.close();
  await redis?.close();
});

describe('the Redis state', () => {
  it('resolves every conversation shape exactly as the memory state does, and hands over the same fix state', async () => {
    const memory = await drive(new MemoryProxyState(), scenario());
    const one = await redisState('parity:');
    const shared = await drive(one, scenario());
    expect(shared).toEqual(memory);
    // One instance serves every turn: the plain continuations of the line it served last (four in this
    // traffic) came from its tracked copy, with no read; every other shape read from Redis.
    expect(one.health().readCache?.cached).toBe(4);
    // The traffic held every relation, so the comparison covered them all.
    expect(new Set(memory.map((m) => m.relation))).toEqual(new Set(['new', 'continues', 'sibling', 'fork']));
    expect(memory.some((m) => m.reclassified.length > 0)).toBe(true);
  });

  it('lets any instance continue any conversation: three instances in turn give one instance’s answers', async () => {
    const memory = await drive(new MemoryProxyState(), scenario());
    const fleet = [await redisState('rr:'), await redisState('rr:'), await redisState('rr:')];
    let n = 0;
    const rr: ProxyState = {
      ...fleet[0]!,
      kind: 'redis',
      local: fleet[0]!.local,
      prepare: (...args) => (fleet[n % 3] as ProxyState).prepare(...args),
      commit: (...args) => (fleet[n++ % 3] as ProxyState).commit(...args),
      started: () => {},
      health: () => fleet[0]!.health(),
      metricsText: () => '',
      close: async () => {},
    };
    expect(await drive(rr, scenario())).toEqual(memory);
    // Each turn lands on another instance than the last: no copy survived to be used.
    expect(fleet.map((s) => s.health().readCache?.cached)).toEqual([0, 0, 0]);
  });

  it('continues what it served last from its tracked copy; another instance’s read or write drops the copy before its next request', async () => {
    const [x, y] = [await redisState('warm:'), await redisState('warm:')];
    const headers = { 'x-cacheward-session': 'warm' };
    const step = async (s: RedisProxyState, id: string, n: number) => {
      const px = prefixOf({ messages: history(n), label: 'warm' });
      const p = await s.prepare(id, px, headers, n * 1000);
      if (!p.ok) throw new Error(p.detail);
      await s.commit(p, '/v1/messages', 200, afterOf(p, px));
      return p;
    };
    const cached = () => x.health().readCache?.cached;
    await step(x, 'w1', 1);
    expect(cached()).toBe(0);
    const w2 = await step(x, 'w2', 2);
    expect(cached()).toBe(1);
    expect(w2.tracked.resolution).toMatchObject({ parent: 'w1', relation: 'continues', turn: 2 });
    expect(w2.states?.get('chain')).toEqual(['w1']);
    // Another instance serves the next turn; then the client's next request reaches x.
    const w3 = await step(y, 'w3', 3);
    expect(w3.tracked.resolution).toMatchObject({ parent: 'w2', relation: 'continues', turn: 3 });
    await clientHop();
    const w4 = await step(x, 'w4', 4);
    expect(cached()).toBe(1);
    expect(w4.tracked.resolution).toMatchObject({ parent: 'w3', relation: 'continues', turn: 4 });
    expect(w4.states?.get('chain')).toEqual(['w1', 'w2', 'w3']);
    // A read alone is enough: y only resolves turn 5 (nothing forwarded, nothing committed yet).
    const px5 = prefixOf({ messages: history(5), label: 'warm' });
    const seen = x.health().readCache?.invalidations ?? 0;
    const y5 = await y.prepare('w5y', px5, headers, 5000);
    expect(y5.ok).toBe(true);
    await clientHop();
    expect(x.health().readCache?.invalidations).toBeGreaterThan(seen);
    const x5 = await x.prepare('w5x', px5, headers, 5000);
    expect(cached()).toBe(1);
    if (x5.ok) expect(x5.tracked.resolution).toMatchObject({ parent: 'w4', turn: 5 });
    expect(x.health().readCache?.tracking).toBe(true);
  });

  it('verifies at commit what its copy cannot know: a transcript already in use makes it lose and recompute', async () => {
    const x = await redisState('verify:');
    const headers = { 'x-cacheward-session': 'verify' };
    for (const [id, n] of [
      ['v1', 1],
      ['v2', 2],
    ] as const) {
      const px = prefixOf({ messages: history(n), label: 'verify' });
      const p = await x.prepare(id, px, headers, n * 1000);
      if (!p.ok) throw new Error(p.detail);
      await x.commit(p, '/v1/messages', 200, afterOf(p, px));
    }
    // A writer this instance never heard of (a state from before it tracked one) ended a request where
    // turn 3 ends. No key of the copy changed, so turn 3 resolves on the copy; the commit finds out.
    const px3 = prefixOf({ messages: history(3), label: 'verify' });
    const last = messageEnds(px3).at(-1)?.transcript as string;
    redis.cli('rpush', `verify:e:${last}`, 'ghost');
    const before = x.health().readCache?.cached ?? 0;
    const p3 = await x.prepare('v3', px3, headers, 3000);
    if (!p3.ok) throw new Error(p3.detail);
    expect(x.health().readCache?.cached).toBe(before + 1);
    const c3 = await x.commit(p3, '/v1/messages', 200, afterOf(p3, px3));
    expect(c3.outcome).toBe('recomputed');
    expect(c3.note?.notes[0]).toMatch(/resolved again on the new state \(continues c-v1, turn 3\)/);
    expect(redis.cli('lrange', `verify:e:${last}`, '0', '-1').split('\n')).toContain('v3');
    expect(JSON.parse(redis.cli('get', 'verify:c:c-v1')).requests).toBe(3);
  });

  it('gives every key an expiry after the longest its cache keeps anything readable, as memory does', async () => {
    const keys = redis.cli('--scan', '--pattern', 'parity:*').trim().split('\n').filter(Boolean);
    expect(keys.length).toBeGreaterThan(30);
    const ttls = keys.map((k) => Number(redis.cli('ttl', k).trim()));
    expect(ttls.every((t) => t > 0)).toBe(true);
    // Anthropic: its cache keeps nothing readable past 1 h (the cache models), so 1 h and 15 min of margin,
    // whatever an Anthropic body says of OpenAI's retention; the hourly buckets of passing entries an hour more.
    const anthropic = Math.ceil(longestCacheTtlMs('anthropic-messages') / 1000) + 15 * 60;
    expect(anthropic).toBe(4500);
    expect(Math.max(...ttls)).toBeLessThanOrEqual(anthropic + 3600);
    const buckets = keys.filter((k) => k.startsWith(`parity:pb:${anthropic}:`));
    expect(buckets.length).toBeGreaterThan(0);
    for (const b of buckets) expect(Number(redis.cli('ttl', b).trim())).toBeLessThanOrEqual(anthropic + 3600);
    for (const f of ['parity:f:r1', 'parity:f:r17']) {
      expect(Number(redis.cli('ttl', f).trim())).toBeLessThanOrEqual(anthropic);
      expect(Number(redis.cli('ttl', f).trim())).toBeGreaterThan(anthropic - 300);
    }
  });

  it('keeps an OpenAI conversation that names no retention for the 24 h its model defaults to, as memory does', async () => {
    const s = await redisState('retain:');
    const chat = (messages: object[]) =>
      builder.parse(JSON.stringify({ model: 'gpt-5', messages }), { format: 'openai-chat' });
    const system = { role: 'system', content: 'You are a careful coding agent. '.repeat(60) };
    const first = chat([system, { role: 'user', content: 'Fix the test.' }]);
    const p = await s.prepare('o1', first, { 'x-cacheward-session': 'oa' }, 1000);
    if (!p.ok) throw new Error(p.detail);
    await s.commit(p, '/v1/chat/completions', 200, afterOf(p, first));
    // The cache models: gpt-5 takes both retentions and defaults to 24h (no ZDR); 24 h is the longest.
    expect(openaiDefaultRetention('gpt-5')).toBe('24h');
    const day = Math.ceil(longestCacheTtlMs('openai-chat') / 1000) + 15 * 60;
    expect(day).toBe(24 * 3600 + 900);
    const keys = redis.cli('--scan', '--pattern', 'retain:*').trim().split('\n').filter(Boolean);
    const ttl = (k: string) => Number(redis.cli('ttl', k).trim());
    for (const k of ['retain:f:o1', 'retain:r:o1', 'retain:l:oa']) {
      expect(keys).toContain(k);
      expect(ttl(k)).toBeGreaterThan(day - 300);
      expect(ttl(k)).toBeLessThanOrEqual(day);
    }
  });

  it('two instances continuing one conversation at once: one commits, the other recomputes, nothing torn', async () => {
    const [x, y] = [await redisState('race:'), await redisState('race:')];
    const h = [u('go'), a('ok'), u('next')];
    const first = prefixOf({ messages: h, label: 'race' });
    const p0 = await x.prepare('q1', first, { 'x-cacheward-session': 'race' }, 1000);
    if (!p0.ok) throw new Error(p0.detail);
    await x.commit(p0, '/v1/messages', 200, afterOf(p0, first));
    // Both prepare the same next turn before either commits (a parallel duplicate on two instances).
    const next = prefixOf({ messages: [...h, a('done'), u('more')], label: 'race' });
    const [pa, pb] = await Promise.all([
      x.prepare('q2', next, { 'x-cacheward-session': 'race' }, 2000),
      y.prepare('q3', next, { 'x-cacheward-session': 'race' }, 2000),
    ]);
    if (!pa.ok || !pb.ok) throw new Error('unavailable');
    expect(pa.tracked.resolution).toMatchObject({ parent: 'q1', relation: 'continues' });
    expect(pb.tracked.resolution).toMatchObject({ parent: 'q1', relation: 'continues' });
    const ca = await x.commit(pa, '/v1/messages', 200, afterOf(pa, next));
    const cb = await y.commit(pb, '/v1/messages', 200, afterOf(pb, next));
    expect(ca.outcome).toBe('committed');
    expect(cb.outcome).toBe('recomputed');
    expect(cb.note?.notes[0]).toMatch(/another proxy changed conversation c-q1 first/);
    // Recomputed on the new state: the same history resent after q2 is q2's duplicate.
    expect(pb.tracked.resolution).toMatchObject({ parent: 'q2', duplicate: true, conversation: 'c-q1' });
    const conv = JSON.parse(redis.cli('get', 'race:c:c-q1'));
    expect(conv.requests).toBe(3);
    const q1 = JSON.parse(redis.cli('get', 'race:r:q1'));
    expect(q1.children).toBe(1);
    const q2 = JSON.parse(redis.cli('get', 'race:r:q2'));
    expect(q2.children).toBe(1);
    expect(conv.tip).toBe('q3');
    expect(y.health().recomputed).toBe(1);
  });

  it('fails open once a paused Redis has sent nothing back past its limit, at once after that, and resumes', async () => {
    const lines: string[] = [];
    const s = await redisState('slow:', 50, (l) => lines.push(l));
    // Another instance served this conversation's first turn, so s holds no copy of it and must read.
    const w = await redisState('slow:', 50);
    const step = { messages: [u('slow one')], label: 'slow' };
    const p1 = await w.prepare('s1', prefixOf(step), headersOf(step), 1000);
    expect(p1.ok).toBe(true);
    if (p1.ok) await w.commit(p1, '/v1/messages', 200, afterOf(p1, prefixOf(step)));
    // s served another conversation last: that one's next turn needs no read, paused or not.
    const own = { messages: [u('mine')], label: 'own' };
    const o1 = await s.prepare('o1', prefixOf(own), headersOf(own), 1000);
    if (!o1.ok) throw new Error(o1.detail);
    await s.commit(o1, '/v1/messages', 200, afterOf(o1, prefixOf(own)));
    await clientHop();
    const limit = s.health().waitLimitMs as number;
    expect(limit).toBeGreaterThanOrEqual(50);
    redis.cli('client', 'pause', String(limit + 1500), 'ALL');
    const next = { messages: [u('slow one'), a('ok'), u('then')], label: 'slow' };
    const t0 = performance.now();
    const p2 = await s.prepare('s2', prefixOf(next), headersOf(next), 2000);
    const waited = performance.now() - t0;
    expect(p2.ok).toBe(false);
    if (!p2.ok) expect(p2.detail).toMatch(/sent nothing back for \d+ ms/);
    // It waited for Redis as long as its limit (a generous bound above it: the machine may be busy).
    expect(waited).toBeGreaterThanOrEqual(limit - 5);
    expect(waited).toBeLessThan(limit + 1000);
    expect(s.health()).toMatchObject({
      status: 'degraded',
      failedOpen: 1,
      outages: 1,
      outage: { kind: 'silent' },
    });
    // Once Redis is out, the next request does not wait at all.
    const t2 = performance.now();
    const p2b = await s.prepare('s2b', prefixOf(next), headersOf(next), 2100);
    expect(p2b.ok).toBe(false);
    expect(performance.now() - t2).toBeLessThan(limit);
    const ownNext = { messages: [u('mine'), a('ok'), u('more')], label: 'own' };
    const o2 = await s.prepare('o2', prefixOf(ownNext), headersOf(ownNext), 2500);
    expect(o2.ok && o2.tracked.resolution).toMatchObject({ parent: 'o1', relation: 'continues' });
    expect(s.health()).toMatchObject({ status: 'degraded', failedOpen: 2, readCache: { cached: 1 } });
    // Waits for the pause to end: redis-cli's own PING is held until Redis serves clients again.
    redis.cli('ping');
    const p3 = await s.prepare('s3', prefixOf(next), headersOf(next), 3000);
    expect(p3.ok).toBe(true);
    if (p3.ok) expect(p3.tracked.resolution).toMatchObject({ parent: 's1', relation: 'continues' });
    expect(s.health()).toMatchObject({ status: 'ok', outages: 1, failedOpen: 2 });
    expect(s.health().recoveredAt).toBeDefined();
    // One line when it started, one when it ended.
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(/^state degraded .*sent nothing back/);
    expect(lines[1]).toMatch(/answers again after .* s \(2 requests went out unfixed meanwhile\)/);
  });

  it('does not mistake a reply left unread while the proxy was starved of CPU for silence', async () => {
    const s = await redisState('starved:', 50);
    const w = await redisState('starved:', 50);
    const step = { messages: [u('starved')], label: 'starved' };
    const p1 = await w.prepare('v1', prefixOf(step), headersOf(step), 1000);
    if (!p1.ok) throw new Error(p1.detail);
    await w.commit(p1, '/v1/messages', 200, afterOf(p1, prefixOf(step)));
    await clientHop();
    // Right after the read went out, the process is held well past the limit (as a machine under load
    // holds it): when it runs again, the limit's timer is due and Redis's answer waits unread in the socket.
    const hold = (s.health().waitLimitMs as number) + 300;
    setImmediate(() => {
      const until = performance.now() + hold;
      while (performance.now() < until) {}
    });
    const next = { messages: [u('starved'), a('ok'), u('then')], label: 'starved' };
    const p2 = await s.prepare('v2', prefixOf(next), headersOf(next), 2000);
    expect(p2.ok && p2.tracked.resolution).toMatchObject({ parent: 'v1', relation: 'continues' });
    expect(s.health()).toMatchObject({ status: 'ok', failedOpen: 0, outages: 0 });
  });

  it('waits for a Redis that is slow but answers: the limit follows the round trips it measures', async () => {
    // Every reply from Redis held back 150 ms on its way (a machine so busy that Redis answers late).
    const relay = await slowRelay(redis.port, 150);
    try {
      const lines: string[] = [];
      const slow = await RedisProxyState.connect({
        spec: parseStateSpec(`redis://127.0.0.1:${relay.port}`) as Extract<
          ReturnType<typeof parseStateSpec>,
          { kind: 'redis' }
        >,
        prefix: 'late:',
        budgetMs: 50,
        heartbeatMs: 200,
        log: (l) => lines.push(l),
      });
      states.push(slow);
      // Its first round trips (the scripts it loads at connect) were measured: ten of them is its limit.
      expect(slow.health().waitLimitMs).toBeGreaterThanOrEqual(1_000);
      let parent: string | undefined;
      for (let t = 1; t <= 6; t++) {
        const step = { messages: history(t), label: 'late' };
        const p = await slow.prepare(`l${t}`, prefixOf(step), headersOf(step), t * 1000);
        expect(p.ok, `turn ${t}`).toBe(true);
        if (!p.ok) continue;
        expect(p.tracked.resolution.parent).toBe(parent);
        await slow.commit(p, '/v1/messages', 200, afterOf(p, prefixOf(step)));
        parent = `l${t}`;
        // Another proxy touched the session: the next turn must read from Redis, through the slow relay.
        const seen = slow.health().readCache?.invalidations ?? 0;
        redis.cli('set', 'late:t:late', '1');
        await until(() => (slow.health().readCache?.invalidations ?? 0) > seen);
      }
      expect(slow.health()).toMatchObject({
        status: 'ok',
        failedOpen: 0,
        outages: 0,
        readCache: { cached: 0 },
      });
      expect(lines).toEqual([]);
    } finally {
      await relay.close();
    }
  });

  it('counts Redis out of memory as one outage with two lines, keeps fixing, and records turns again after', async () => {
    const lines: string[] = [];
    const s = await redisState('oom:', 50, (l) => lines.push(l));
    const first = { messages: history(1), label: 'oom' };
    const p0 = await s.prepare('m0', prefixOf(first), headersOf(first), 500);
    if (!p0.ok) throw new Error(p0.detail);
    await s.commit(p0, '/v1/messages', 200, afterOf(p0, prefixOf(first)));
    redis.cli('config', 'set', 'maxmemory-policy', 'noeviction');
    redis.cli('config', 'set', 'maxmemory', '1');
    const outcomes: string[] = [];
    try {
      for (let t = 2; t <= 21; t++) {
        const step = { messages: history(t), label: 'oom' };
        const p = await s.prepare(`m${t}`, prefixOf(step), headersOf(step), t * 1000);
        // Fixed from the state Redis holds: every request, though no turn can be recorded.
        expect(p.ok, `request ${t}`).toBe(true);
        if (!p.ok) continue;
        expect(p.states?.get('chain')).toEqual(['m0']);
        const c = await s.commit(p, '/v1/messages', 200, afterOf(p, prefixOf(step)));
        outcomes.push(c.outcome);
        if (t === 2) expect(c.note?.notes[0]).toMatch(/not in the shared state: Redis failed: OOM/);
      }
      expect(new Set(outcomes)).toEqual(new Set(['not-committed']));
      expect(s.health()).toMatchObject({
        status: 'degraded',
        failedOpen: 0,
        outages: 1,
        outage: { kind: 'oom' },
      });
    } finally {
      redis.cli('config', 'set', 'maxmemory', '0');
    }
    const step = { messages: history(22), label: 'oom' };
    const p = await s.prepare('m22', prefixOf(step), headersOf(step), 22_000);
    if (!p.ok) throw new Error(p.detail);
    expect((await s.commit(p, '/v1/messages', 200, afterOf(p, prefixOf(step)))).outcome).toBe('committed');
    expect(s.health()).toMatchObject({ status: 'ok', failedOpen: 0, outages: 1, notCommitted: 20 });
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(/out of memory.*requests are still fixed from the state it holds/);
    expect(lines[1]).toMatch(/takes writes again after [\d.]+ s \(20 turns were not recorded meanwhile\)/);
  });

  it('fails open at once while Redis is stopped, and continues the same conversations once it is back', async () => {
    const s = await redisState('down:', 50);
    const step = { messages: [u('survive a restart')], label: 'down' };
    const p1 = await s.prepare('d1', prefixOf(step), headersOf(step), 1000);
    if (!p1.ok) throw new Error(p1.detail);
    await s.commit(p1, '/v1/messages', 200, afterOf(p1, prefixOf(step)));
    await redis.stop();
    const next = { messages: [u('survive a restart'), a('ok'), u('then')], label: 'down' };
    try {
      // The server has exited; the state knows once its connection's close comes in (a moment later on a
      // busy machine; until then its tracked read cache may still answer, as it should while connected).
      await until(() => s.health().status === 'degraded');
      const t0 = performance.now();
      const p2 = await s.prepare('d2', prefixOf(next), headersOf(next), 2000);
      expect(p2.ok).toBe(false);
      expect(performance.now() - t0).toBeLessThan(60);
      expect(s.health().status).toBe('degraded');
      expect(s.health().lastFailure?.reason).toMatch(/Redis/);
    } finally {
      // Whatever failed above, the tests after this one find Redis running.
      await redis.start();
    }
    const deadline = Date.now() + 5000;
    await until(() => s.health().status === 'ok' || Date.now() > deadline);
    const p3 = await s.prepare('d3', prefixOf(next), headersOf(next), 3000);
    expect(p3.ok).toBe(true);
    if (p3.ok) {
      expect(p3.tracked.resolution).toMatchObject({ parent: 'd1', relation: 'continues', turn: 2 });
      expect(p3.states?.get('chain')).toEqual(['d1']);
    }
  });

  it('lists the instances sharing the state, and forgets one that stopped beating', async () => {
    const s1 = await redisState('fleet:');
    const s2 = await redisState('fleet:');
    s1.started('http://127.0.0.1:1');
    s2.started('http://127.0.0.1:2');
    const urls = () => (s1.health().instances ?? []).map((i) => i.url).sort();
    await until(() => urls().length === 2);
    expect(urls()).toEqual(['http://127.0.0.1:1', 'http://127.0.0.1:2']);
    await s2.close();
    await until(() => urls().length === 1);
    expect(urls()).toEqual(['http://127.0.0.1:1']);
  });
});

describe('--state', () => {
  it('takes memory and redis URLs, and names what is wrong with anything else (never the password)', () => {
    expect(parseStateSpec(undefined)).toEqual({ kind: 'memory' });
    expect(parseStateSpec('redis://u:secret@10.0.0.5:6380/2')).toMatchObject({
      kind: 'redis',
      host: '10.0.0.5',
      port: 6380,
      db: 2,
      password: 'secret',
      display: 'redis://10.0.0.5:6380/2',
    });
    expect(() => parseStateSpec('postgres://x')).toThrow(StateConfigError);
    expect(() => parseStateSpec('redis://h:1/99')).toThrow(/database "99" is not a number from 0 to 15/);
    expect(() => parseStateSpec('redis')).toThrow(/use --state memory or --state redis:\/\/HOST:PORT/);
    try {
      parseStateSpec('redis://u:secret@h:1/x');
    } catch (err) {
      expect((err as Error).message).not.toContain('secret');
    }
  });
});
