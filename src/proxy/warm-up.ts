// Warms the proxy's code before it takes traffic: made-up exchanges through a throwaway proxy and simulator.
// It never touches the real proxy's capture, state or telemetry, never leaves loopback, never fails a start.

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Json } from '../core/json.js';
import type { Fix, FixRegistry } from '../fixes/fix.js';
import type { CaptureMode } from '../record/capture-record.js';
import { agentConversation } from '../sim/agent-conversation.js';
import { createSimulator } from '../sim/simulator.js';
import { type CachewardProxy, createProxy } from './create-proxy.js';

/** What the warm-up runs: the real proxy's capture mode and fixes, so their code is what gets compiled. */
export interface WarmUpOptions {
  capture?: CaptureMode;
  fixes?: ReadonlyArray<string | Fix>;
  registry?: FixRegistry;
  /** Gives up (and the start goes on) at its next step after this long, in ms (default 5,000). */
  timeoutMs?: number;
  /** Stops it early, as the time limit does (the CLI's SIGINT/SIGTERM); it still cleans up first. */
  signal?: AbortSignal;
}

/** How the warm-up went: exchanges answered, how long it took, and why it stopped early if it did. */
export interface WarmUpResult {
  exchanges: number;
  ms: number;
  error?: string;
}

/**
 * How many times the requests are sent (each time another conversation): a first call only compiles a
 * function, V8 optimizes it after more. Five rounds is where the first real exchange's longest pause stops
 * falling for a fraction of a second more start-up (bench/cold-start.ts; figures in docs/performance.md).
 */
export const WARM_UP_ROUNDS = 5;

/** A made-up key in each provider's header (the simulator wants one; no request leaves the machine). */
const HEADERS = {
  anthropic: { 'content-type': 'application/json', 'x-api-key': 'cacheward-warm-up' },
  openai: { 'content-type': 'application/json', authorization: 'Bearer cacheward-warm-up' },
};

/**
 * The bodies sent: an agent session growing over three turns (streamed and not), the same conversation in
 * Claude Code's key order, and an OpenAI chat and Responses request. Generated, so nothing of a user's.
 */
export function warmUpRequests(round: number): Array<{ path: string; body: Json }> {
  const seed = 11 + 2 * round;
  const turn = (turns: number, stream: boolean) => ({
    path: '/v1/messages',
    body: { ...agentConversation({ turns, seed, cacheLast: true }), stream },
  });
  const { messages, system, tools, ...rest } = agentConversation({ turns: 2, seed: seed + 1 }) as Json;
  const system2 = 'You are a careful coding agent. Read before you edit.';
  return [
    turn(1, true),
    turn(2, false),
    turn(3, true),
    { path: '/v1/messages', body: { ...rest, messages, system, tools, stream: true } },
    {
      path: '/v1/chat/completions',
      body: {
        model: 'gpt-5.4',
        stream: true,
        messages: [
          { role: 'system', content: system2 },
          { role: 'user', content: `Round ${round}: list the files in src/ and say what each is for.` },
        ],
      },
    },
    {
      path: '/v1/responses',
      body: { model: 'gpt-5.4', instructions: system2, input: `Round ${round}: summarize the README.` },
    },
  ];
}

/**
 * Runs the warm-up. A real proxy's first exchanges otherwise run cold (V8 compiles each function on its first
 * call), and the first requests meet that compilation.
 */
export async function warmUpProxy(options: WarmUpOptions = {}): Promise<WarmUpResult> {
  const started = performance.now();
  const limitMs = options.timeoutMs ?? 5_000;
  // At the time limit (or the caller's signal) the run stops at its next step, a request in flight aborted,
  // and cleans up after itself before this returns: nothing is left listening or on disk.
  const stop = AbortSignal.any([AbortSignal.timeout(limitMs), ...(options.signal ? [options.signal] : [])]);
  const why = () => (options.signal?.aborted ? 'interrupted' : `took longer than ${limitMs} ms`);
  const check = () => {
    if (stop.aborted) throw new Error(why());
  };
  let exchanges = 0;
  let error: string | undefined;
  let dir: string | undefined;
  let proxy: CachewardProxy | undefined;
  const sim = createSimulator({ logger: { error: () => {} } });
  try {
    check();
    const simUrl = await sim.listen({ host: '127.0.0.1', port: 0 });
    check();
    // Its own folder for capture and state (0700, removed after): nothing reaches the real ones.
    dir = await mkdtemp(join(tmpdir(), 'cacheward-warm-up-'));
    check();
    proxy = createProxy({
      upstream: simUrl,
      capture: options.capture ?? 'hashes',
      dir,
      stateDir: join(dir, 'state'),
      state: 'memory',
      ...(options.fixes ? { fixes: options.fixes } : {}),
      ...(options.registry ? { registry: options.registry } : {}),
      logger: { info: () => {}, warn: () => {}, error: () => {} },
    });
    const url = await proxy.listen({ host: '127.0.0.1', port: 0 });
    const requests = Array.from({ length: WARM_UP_ROUNDS }, (_, round) => warmUpRequests(round)).flat();
    for (const { path, body } of requests) {
      check();
      const res = await fetch(`${url}${path}`, {
        method: 'POST',
        headers: path === '/v1/messages' ? HEADERS.anthropic : HEADERS.openai,
        body: JSON.stringify(body),
        signal: stop,
      });
      await res.arrayBuffer();
      if (res.ok) exchanges++;
    }
    check();
    // Each exchange's record and analysis run after its response: wait for them too.
    await proxy.flush();
  } catch (err) {
    error = stop.aborted ? why() : (err as Error).message;
  } finally {
    await proxy?.close().catch(() => {});
    await sim.close().catch(() => {});
    if (dir) await rm(dir, { recursive: true, force: true }).catch(() => {});
  }
  const result: WarmUpResult = { exchanges, ms: performance.now() - started };
  if (error !== undefined) result.error = error;
  return result;
}
