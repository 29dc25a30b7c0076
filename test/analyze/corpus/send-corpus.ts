// Sends the corpus with the official SDKs through two real capturing proxies (hashes and full) into one
// simulator on one advanceable clock. Loopback only; it closes every server it starts, keeps no key.

import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { type AdvanceableClock, OffsetClock } from '../../../src/core/clock.js';
import { type CachewardProxy, createProxy } from '../../../src/proxy/create-proxy.js';
import { createSimulator } from '../../../src/sim/simulator.js';
import type { Json } from './conversation.js';
import type { CorpusSession } from './corpus.js';
import type { PlannedRequest } from './session.js';

/** One request as sent: its ground truth and the id of the response it got. */
export interface SentRequest {
  plan: PlannedRequest;
  responseId: string;
  capture: 'hashes' | 'full';
}

export interface CorpusRun {
  sent: SentRequest[];
  /** The capture folder of each proxy, and the temporary folder that holds both. */
  dirs: { hashes: string; full: string };
  root: string;
  seconds: number;
}

/** Keys of two workspaces: each proxy's traffic has a cache scope of its own at the simulator. */
const KEYS = {
  hashes: {
    anthropic: 'corpus-test-key-anthropic-hashes-0000',
    openai: 'corpus-test-key-openai-hashes-0000',
  },
  full: { anthropic: 'corpus-test-key-anthropic-full-00000', openai: 'corpus-test-key-openai-full-00000' },
};

/** A new session starts every 15 seconds, so a dozen or more are under way at once, as on a shared proxy. */
const SESSION_SPACING_MS = 15_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A request (or a parallel pair) of one session at its time on the corpus's timeline. */
interface Step {
  at: number;
  session: CorpusSession;
  plans: PlannedRequest[];
  order: number;
}

/**
 * Lays every session on one timeline (each starts 15 seconds after the one before and keeps its own idle
 * gaps), so the sessions interleave; each request still goes out only after its predecessor answered.
 */
function timeline(sessions: readonly CorpusSession[]): Step[] {
  const steps: Step[] = [];
  sessions.forEach((session, k) => {
    let at = k * SESSION_SPACING_MS;
    const reqs = session.requests;
    for (let i = 0; i < reqs.length; i++) {
      const plan = reqs[i] as PlannedRequest;
      at += plan.idleMs;
      const plans = [plan];
      const next = reqs[i + 1];
      if (next?.parallelWithPrevious) {
        plans.push(next);
        i++;
      }
      steps.push({ at, session, plans, order: steps.length });
    }
  });
  return steps.sort((a, b) => a.at - b.at || a.order - b.order);
}

/** Sends every session on one timeline; parallel pairs go out together, the second once the first arrived. */
export async function sendCorpus(sessions: readonly CorpusSession[]): Promise<CorpusRun> {
  const began = performance.now();
  // Real time plus what the corpus advances: stalls take real milliseconds, idle gaps are jumped over.
  const clock: AdvanceableClock = new OffsetClock();
  const sim = createSimulator({ clock });
  const simUrl = await sim.listen();
  const root = mkdtempSync(join(tmpdir(), 'cacheward-corpus-'));
  const dirs = { hashes: join(root, 'hashes'), full: join(root, 'full') };
  const proxies: Record<'hashes' | 'full', CachewardProxy> = {
    hashes: createProxy({
      upstream: simUrl,
      dir: dirs.hashes,
      clock,
      capture: 'hashes',
      logger: {},
    }),
    full: createProxy({ upstream: simUrl, dir: dirs.full, clock, capture: 'full', logger: {} }),
  };
  await Promise.all([proxies.hashes.listen(), proxies.full.listen()]);
  const clients = {
    hashes: clientsFor(proxies.hashes.url, KEYS.hashes),
    full: clientsFor(proxies.full.url, KEYS.full),
  };
  const sent: SentRequest[] = [];
  // The latest response of each session, for the turns sent as previous_response_id chains.
  const latest = new Map<string, string>();
  const send = async (c: Clients, plan: PlannedRequest): Promise<string> => {
    const id = await sendPlan(c, plan, latest.get(plan.session));
    if (id) latest.set(plan.session, id);
    return id;
  };
  try {
    const origin = clock.now();
    for (const step of timeline(sessions)) {
      const lag = origin + step.at - clock.now();
      if (lag > 0) clock.advance(lag);
      const c = clients[step.session.capture];
      const capture = step.session.capture;
      const [plan, twin] = step.plans as [PlannedRequest, PlannedRequest | undefined];
      if (twin) {
        // The second goes out once the first has reached the simulator (so their order is known).
        const arrived = sim.stats().requests;
        const first = send(c, plan);
        while (sim.stats().requests === arrived) await sleep(1);
        const [a, b] = await Promise.all([first, send(c, twin)]);
        sent.push({ plan, responseId: a, capture }, { plan: twin, responseId: b, capture });
      } else sent.push({ plan, responseId: await send(c, plan), capture });
    }
    await proxies.hashes.flush();
    await proxies.full.flush();
  } finally {
    await proxies.hashes.close();
    await proxies.full.close();
    await sim.close();
  }
  return { sent, dirs, root, seconds: (performance.now() - began) / 1000 };
}

interface Clients {
  anthropic: Anthropic;
  openai: OpenAI;
}

function clientsFor(url: string, keys: { anthropic: string; openai: string }): Clients {
  return {
    anthropic: new Anthropic({ apiKey: keys.anthropic, baseURL: url, maxRetries: 0 }),
    openai: new OpenAI({ apiKey: keys.openai, baseURL: `${url}/v1`, maxRetries: 0 }),
  };
}

/**
 * Sends one request with the SDK its format belongs to; resolves to the response id (empty for a
 * count_tokens call, or a refusal the plan expects; any other error fails the run).
 */
async function sendPlan(c: Clients, plan: PlannedRequest, previous: string | undefined): Promise<string> {
  const fault = plan.kind === 'rate_limited' ? 'rate-limit' : plan.stallMs ? `stall=${plan.stallMs}` : '';
  const headers = { ...plan.headers, ...(fault ? { 'x-sim-fault': fault } : {}) };
  if (plan.kind === 'count_tokens') {
    const { max_tokens: _m, metadata: _d, ...body } = plan.body;
    await c.anthropic.messages.countTokens(body as never, { headers });
    return '';
  }
  if (plan.kind === 'refused' || plan.kind === 'rate_limited') {
    const status = await sendTurn(c, plan, headers).then(
      () => 200,
      (err: { status?: number }) => err.status ?? 0,
    );
    const want = plan.kind === 'refused' ? 400 : 429;
    if (status !== want) throw new Error(`${plan.session}: expected a ${want}, got ${status}`);
    return '';
  }
  return sendTurn(c, plan, headers, previous);
}

async function sendTurn(
  c: Clients,
  plan: PlannedRequest,
  headers: Record<string, string>,
  previous?: string,
): Promise<string> {
  if (plan.chain && !previous) throw new Error(`${plan.session}: a chained turn with no response before it`);
  const body = (
    plan.chain
      ? {
          ...plan.body,
          previous_response_id: previous,
          input: (plan.body.input as Json[]).slice(plan.chain.after),
        }
      : plan.body
  ) as never;
  if (plan.format === 'anthropic') {
    if (plan.stream) return (await c.anthropic.messages.stream(body, { headers }).finalMessage()).id;
    return ((await c.anthropic.messages.create(body, { headers })) as { id: string }).id;
  }
  if (plan.format === 'chat') {
    if (!plan.stream) return (await c.openai.chat.completions.create(body, { headers })).id;
    const stream = await c.openai.chat.completions.create(
      { ...(plan.body as Json), stream: true, stream_options: { include_usage: true } } as never,
      { headers },
    );
    let id = '';
    for await (const chunk of stream as unknown as AsyncIterable<{ id: string }>) id ||= chunk.id;
    return id;
  }
  if (plan.stream) return (await c.openai.responses.stream(body, { headers }).finalResponse()).id;
  return ((await c.openai.responses.create(body, { headers })) as { id: string }).id;
}
