// A fleet for real: redis-server, `cacheward sim` and three `cacheward proxy --state redis://…` processes
// (the built CLI), Claude Code-shaped conversations with fixes on spread over them round-robin. Checked
// against one proxy on the same traffic: the same forwarded bytes and the same simulator reads and writes;
// then kill -9 one proxy, then stop and restart Redis, mid-run: nothing lost, altered or torn, and the
// health endpoint says what happened.

import { createHash } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PriceTable } from '../../src/analyze/price-table.js';
import { type ReadRecord, readCaptures } from '../../src/capture/capture-reader.js';
import type { ConversationInfo, RequestNode } from '../../src/conversation/conversation-store.js';
import { analyzePaths } from '../../src/report/analyze-paths.js';
import { decodeFixState, partsOf } from '../../src/state/fix-state-codec.js';
import { type RedisServer, startRedis } from '../state/redis-server.js';
import { waitFor } from '../wait-for.js';
import { claudeCodeConversation, type Turn } from './claude-code-traffic.js';
import { FIXES, KEY, type Proc, simStats, startCli, stop, stopAll } from './fleet-support.js';

const CONVERSATIONS = 4;
const TURNS = 8;

/** A load balancer in miniature: round-robin over the live proxies; a refused connection takes a proxy out. */
class RoundRobin {
  private next = 0;
  readonly sentTo = new Map<string, string>();
  refused = 0;
  constructor(readonly proxies: Proc[]) {}

  async send(t: Turn): Promise<string> {
    for (let tries = 0; tries < this.proxies.length * 2; tries++) {
      const p = this.proxies[this.next++ % this.proxies.length] as Proc;
      if (!p.alive) continue;
      const client = new Anthropic({ apiKey: KEY, baseURL: p.url, maxRetries: 0 });
      p.inflight++;
      try {
        const stream = client.messages.stream(t.body as unknown as Anthropic.MessageCreateParams, {
          headers: t.headers,
        });
        const message = await stream.finalMessage();
        this.sentTo.set(message.id, p.url);
        return message.id;
      } catch (err) {
        // Only a proxy that is gone may be skipped: its connection was refused, nothing reached it.
        if (
          !(err instanceof Anthropic.APIConnectionError) ||
          (p.child.exitCode === null && p.child.signalCode === null)
        )
          throw err;
        p.alive = false;
        this.refused++;
      } finally {
        p.inflight--;
      }
    }
    throw new Error('no proxy left');
  }
}

/** Every conversation's turns 1..TURNS; round `r` sends turn r of every conversation at once. */
const traffic = Array.from({ length: CONVERSATIONS }, (_, n) => claudeCodeConversation(n + 1, TURNS));
const stepKey = (t: Turn) => `${t.conversation}/${t.turn}`;

async function runRound(
  rr: RoundRobin,
  round: number,
  ids: Map<string, string>,
  during?: (done: number) => Promise<void>,
) {
  let done = 0;
  await Promise.all(
    traffic.map(async (conv) => {
      const t = conv[round - 1] as Turn;
      ids.set(stepKey(t), await rr.send(t));
      done++;
      await during?.(done);
    }),
  );
}

async function recordsOf(dirs: string[]): Promise<Map<string, ReadRecord>> {
  const out = new Map<string, ReadRecord>();
  for await (const r of readCaptures(dirs)) if (r.record.responseId) out.set(r.record.responseId, r);
  return out;
}

/** The record says the client's bytes went out because the shared state was out. */
const wentOutUnfixed = (r: ReadRecord) =>
  /shared state was not available \(Redis was out\); the client's bytes went out unchanged/.test(
    r.record.fixes.find((f) => f.fix === 'state')?.notes.join(' ') ?? '',
  );

const sha = (b: Buffer | undefined) => (b ? createHash('sha256').update(b).digest('hex') : 'none');

let redis: RedisServer;
let sim: Proc;

beforeAll(async () => {
  redis = await startRedis();
  sim = await startCli(['sim', '--port', '0']);
}, 30_000);

afterAll(async () => {
  stopAll();
  await redis?.close();
});

describe('three proxies on one Redis', () => {
  it('forward what one proxy forwards, survive kill -9 and a Redis restart, and say so', async () => {
    // One proxy, memory state: the reference.
    const baseDir = mkdtempSync(join(tmpdir(), 'cacheward-fleet-one-'));
    const one = await startCli(
      ['proxy', '--port', '0', '--upstream', sim.url, '--capture', 'full', '--dir', baseDir, '--fix', FIXES],
      baseDir,
    );
    const oneIds = new Map<string, string>();
    const oneRR = new RoundRobin([one]);
    let oneAfter5 = await simStats(sim.url);
    await fetch(`${sim.url}/_sim/reset`, { method: 'POST' });
    for (let round = 1; round <= TURNS; round++) {
      await runRound(oneRR, round, oneIds);
      if (round === 5) oneAfter5 = await simStats(sim.url);
    }
    await stop(one);

    // Three proxies on Redis, round-robin.
    await fetch(`${sim.url}/_sim/reset`, { method: 'POST' });
    const prefix = `fleet-${process.pid}:`;
    const fleet: Proc[] = [];
    for (let i = 0; i < 3; i++) {
      const dir = mkdtempSync(join(tmpdir(), `cacheward-fleet-${i}-`));
      fleet.push(
        await startCli(
          [
            'proxy',
            '--port',
            '0',
            '--upstream',
            sim.url,
            '--capture',
            'full',
            '--dir',
            dir,
            '--fix',
            FIXES,
            '--state',
            redis.url,
            '--state-prefix',
            prefix,
          ],
          dir,
        ),
      );
    }
    const health = async (p: Proc) => {
      const r = await fetch(`${p.url}/_cacheward/health`);
      return {
        code: r.status,
        body: (await r.json()) as { status: string; state: Record<string, unknown>; capture: unknown },
      };
    };
    const [a, b, c] = fleet as [Proc, Proc, Proc];
    const rr = new RoundRobin(fleet);
    const ids = new Map<string, string>();
    for (let round = 1; round <= 3; round++) await runRound(rr, round, ids);
    expect((await health(a)).body.state).toMatchObject({ kind: 'redis', status: 'ok' });
    const instances = async (p: Proc, n: number) => {
      // Each proxy refreshes its view of the fleet once a second (its heartbeat).
      const list = await waitFor(`${n} instances in the health of ${p.url}`, async () => {
        const l = (await health(p)).body.state.instances as Array<{ url: string }>;
        return l.length === n && l;
      });
      return list.map((i) => i.url).sort();
    };
    expect(await instances(a, 3)).toEqual(fleet.map((p) => p.url).sort());

    // kill -9 the third proxy between two requests of every conversation it served.
    const servedByC = [...rr.sentTo.values()].filter((url) => url === c.url).length;
    await waitFor('the third proxy to have its exchanges on disk', async () => {
      const capture = (await health(c)).body.capture as { written: number };
      return capture.written === servedByC;
    });
    c.child.kill('SIGKILL');
    await new Promise((r) => c.child.once('exit', () => r(undefined)));
    for (let round = 4; round <= 5; round++) await runRound(rr, round, ids);
    expect(rr.refused).toBe(1);
    expect(await simStats(sim.url)).toEqual(oneAfter5);
    // The survivors see the fleet shrink once the dead one stops beating (3 s).
    expect(await instances(a, 2)).toEqual([a.url, b.url].sort());

    // Redis stops while round 6 is in flight and comes back during round 7.
    await runRound(rr, 6, ids, async (done) => {
      if (done === 2) await redis.stop();
    });
    // The proxy learns Redis is gone when its socket closes (a moment after the server exits).
    const degradedSeen = await waitFor('the health of the first proxy to say 503', async () => {
      const h = await health(a);
      return h.code === 503 && h;
    });
    await runRound(rr, 7, ids, async (done) => {
      if (done === 2) await redis.start();
    });
    // Both survivors back on Redis before the last round (each reconnects on its own schedule).
    for (const p of [a, b])
      await waitFor(`${p.url} back on Redis`, async () => (await health(p)).code === 200);
    await runRound(rr, 8, ids);
    // What the unfixed requests cost, once each proxy's live analysis has named their misses.
    type Cost = { requests: number; rewrittenTokens: number };
    const costed = (p: Proc) =>
      waitFor(`the live analysis of ${p.url} to have named every unfixed request's miss`, async () => {
        const h = await health(p);
        return (h.body.state.unfixedCost as Cost).requests === h.body.state.failedOpen && h;
      });
    const recovered = await costed(a);
    const recoveredB = await costed(b);
    const metrics = await (await fetch(`${a.url}/_cacheward/metrics`)).text();
    await stop(a);
    await stop(b);
    // Each proxy's stop line says a fleet's conversations span its proxies.
    for (const p of [a, b])
      expect(p.stderr.join('')).toMatch(
        /cacheward proxy: stopped; .*give every proxy's capture folder to see them whole/,
      );

    // Nothing lost: every request answered once, and the simulator saw each once.
    expect(ids.size).toBe(CONVERSATIONS * TURNS);
    expect((await simStats(sim.url)).requests).toBe(CONVERSATIONS * TURNS);

    // The health endpoint said what happened.
    expect(degradedSeen.code).toBe(503);
    expect(degradedSeen.body.status).toBe('degraded');
    expect(degradedSeen.body.state).toMatchObject({ kind: 'redis', status: 'degraded' });
    expect(String((degradedSeen.body.state.lastFailure as { reason: string }).reason)).toMatch(/Redis/);
    expect(recovered.code).toBe(200);
    expect(recovered.body.state).toMatchObject({ status: 'ok' });
    expect(recovered.body.state.outages as number).toBeGreaterThanOrEqual(1);
    expect(recovered.body.state.failedOpen as number).toBeGreaterThanOrEqual(1);
    expect(recovered.body.state.recoveredAt).toBeDefined();
    expect(metrics).toMatch(/cacheward_state_requests_total\{outcome="failed_open"\} [1-9]/);
    // With two proxies left, a conversation's turns keep landing on the same one: those turns resolved
    // on its tracked copy, with no read from Redis (and the checks below hold them to one proxy's bytes).
    const cached = [recovered, recoveredB].map((h) => (h.body.state.readCache as { cached: number }).cached);
    expect(cached.reduce((x, y) => x + y, 0)).toBeGreaterThan(0);
    expect(recovered.body.state.readCache).toMatchObject({ tracking: true });

    // Nothing altered: every forwarded body is the one proxy's, or (while Redis was away) the client's own
    // bytes with a record that says why.
    const oneRecords = await recordsOf([baseDir]);
    const fleetRecords = await recordsOf(fleet.map((p) => p.dir));
    let unfixed = 0;
    let bodiesDropped = 0;
    const unfixedRounds = new Set<number>();
    for (const conv of traffic) {
      for (const t of conv) {
        const ref = oneRecords.get(oneIds.get(stepKey(t)) as string);
        const got = fleetRecords.get(ids.get(stepKey(t)) as string);
        expect(ref, `one-proxy record of ${stepKey(t)}`).toBeDefined();
        expect(got, `fleet record of ${stepKey(t)}`).toBeDefined();
        if (!ref || !got) continue;
        // A capture under load may let a body go (the record says `bodyDropped`): its bytes are not compared.
        // Those that went out unfixed are still counted, by what their record says.
        if (got.record.bodyDropped || ref.record.bodyDropped) {
          bodiesDropped++;
          if (wentOutUnfixed(got)) {
            unfixed++;
            unfixedRounds.add(t.turn);
          }
          continue;
        }
        const same = sha(got.body) === sha(ref.body);
        if (t.turn <= 5)
          expect(
            same,
            `round ${t.turn}, conversation ${t.conversation}: ${JSON.stringify(got.record.fixes)} against ${JSON.stringify(ref.record.fixes)}`,
          ).toBe(true);
        if (same) continue;
        expect(sha(got.body), `unfixed ${stepKey(t)} is the client's bytes`).toBe(
          sha(ref.clientBody ?? ref.body),
        );
        expect(got.clientBody).toBeUndefined();
        expect(wentOutUnfixed(got), `unfixed ${stepKey(t)} says why`).toBe(true);
        unfixed++;
        unfixedRounds.add(t.turn);
      }
    }
    expect(unfixed).toBeGreaterThan(0);
    expect(bodiesDropped).toBeLessThan((CONVERSATIONS * TURNS) / 4);
    expect([...unfixedRounds].every((r) => r === 6 || r === 7)).toBe(true);
    // Health counted each of them and what it cost; so does the merged report, from the captures alone.
    const healthCost = [recovered, recoveredB].map((h) => h.body.state.unfixedCost as Cost);
    expect((recovered.body.state.failedOpen as number) + (recoveredB.body.state.failedOpen as number)).toBe(
      unfixed,
    );
    expect(healthCost.reduce((n, c) => n + c.requests, 0)).toBe(unfixed);
    const report = await analyzePaths(
      fleet.map((p) => p.dir),
      { prices: new PriceTable() },
    );
    expect(report.totals.unfixed?.requests).toBe(unfixed);
    expect(report.totals.unfixed?.rewrittenTokens).toBeGreaterThan(0);
    // While Redis is out nothing reaches the shared feed, so each proxy's live analysis judges the unfixed
    // requests on what it saw itself; the report, on every capture, may name a nearer parent: within 2%.
    const live = healthCost.reduce((n, c) => n + c.rewrittenTokens, 0);
    const merged = report.totals.unfixed?.rewrittenTokens ?? 0;
    expect(Math.abs(live - merged)).toBeLessThanOrEqual(merged * 0.02);
    // State resumed: the last round went out exactly as through one proxy.
    for (const conv of traffic) {
      const t = conv[TURNS - 1] as Turn;
      const got = fleetRecords.get(ids.get(stepKey(t)) as string);
      const ref = oneRecords.get(oneIds.get(stepKey(t)) as string);
      if (got?.record.bodyDropped || ref?.record.bodyDropped) continue;
      expect(sha(got?.body)).toBe(sha(ref?.body));
    }
    // The conversations are the one proxy's: the same relation and turn for every step.
    for (const conv of traffic)
      for (const t of conv) {
        const ref = oneRecords.get(oneIds.get(stepKey(t)) as string)?.record.conversation;
        const got = fleetRecords.get(ids.get(stepKey(t)) as string)?.record.conversation;
        if (t.turn <= 5)
          expect({ relation: got?.relation, turn: got?.turn }).toEqual({
            relation: ref?.relation,
            turn: ref?.turn,
          });
      }

    // Nothing torn: every document in Redis reads, and they agree with each other.
    await checkConsistent(redis.port, prefix);
  }, 120_000);
});

/** Reads every key under `prefix` and checks the conversation index holds together. */
async function checkConsistent(port: number, prefix: string): Promise<void> {
  const r = new Redis({ port, host: '127.0.0.1', lazyConnect: true });
  await r.connect();
  try {
    const keys: string[] = [];
    let cursor = '0';
    do {
      const [next, batch] = await r.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
      cursor = next;
      keys.push(...batch);
    } while (cursor !== '0');
    const nodes = new Map<string, RequestNode>();
    const convs = new Map<string, ConversationInfo>();
    for (const k of keys) {
      const rest = k.slice(prefix.length);
      if (rest.startsWith('r:')) nodes.set(rest.slice(2), JSON.parse((await r.get(k)) as string));
      if (rest.startsWith('c:')) convs.set(rest.slice(2), JSON.parse((await r.get(k)) as string));
      if (rest.startsWith('f:')) {
        // A fix document decodes whole: its pair, and every state part it names is there and parses.
        const doc = (await r.get(k)) as string;
        const parts = new Map<string, string | null>();
        for (const h of partsOf(doc).values()) parts.set(h, await r.get(`${prefix}s:${h}`));
        const back = decodeFixState(doc, (h) =>
          parts.get(h) ? JSON.parse(parts.get(h) as string) : undefined,
        );
        expect(back.states.size, k).toBe(2);
        expect(back.pair.forwarded.length, k).toBeGreaterThan(10);
      }
    }
    expect(nodes.size).toBeGreaterThan(CONVERSATIONS * 4);
    for (const [id, c] of convs) {
      const tip = nodes.get(c.tip);
      expect(tip?.conversation, `tip of ${id}`).toBe(id);
      expect(Number(await r.get(`${prefix}v:${id}`))).toBeGreaterThan(0);
      const members = [...nodes.values()].filter((n) => n.conversation === id).length;
      expect(c.requests, `requests of ${id}`).toBe(members);
    }
    for (const n of nodes.values()) {
      expect(convs.has(n.conversation), `conversation of ${n.id}`).toBe(true);
      const children = [...nodes.values()].filter((x) => x.parent === n.id).length;
      expect(n.children, `children of ${n.id}`).toBe(children);
      if (n.next) expect(nodes.get(n.next)?.parent).toBe(n.id);
      if (n.final) {
        const ending = await r.lrange(`${prefix}e:${n.final.transcript}`, 0, -1);
        expect(ending).toContain(n.id);
      }
    }
  } finally {
    r.disconnect();
  }
}
