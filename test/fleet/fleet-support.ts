// What the fleet tests and bench/fleet.ts share: start the built CLI, the simulator's counters, and one
// run of Claude Code-shaped conversations through one proxy on memory state or several on Redis (every
// turn to another proxy than the last), optionally beside a CPU-bound process, with what it cost.

import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import type { LiveRequest, LiveSnapshot } from '../../src/proxy/live-analysis.js';
import { builtCli } from '../suite.js';
import { waitFor } from '../wait-for.js';
import { claudeCodeConversation, type Turn } from './claude-code-traffic.js';

const BIN = builtCli();
export const KEY = 'cacheward-test-anthropic-key-0123456789abcdefghijklmnop';
// pin-reminders first: it restores the message shape tools-freeze's announcement positions refer to.
export const FIXES = 'pin-reminders,tools-freeze';

export interface Proc {
  child: ChildProcess;
  url: string;
  dir: string;
  alive: boolean;
  inflight: number;
  stderr: string[];
}

const children = new Set<ChildProcess>();

/** Starts `cacheward <args>` from dist/ and resolves once it prints its loopback URL. */
export async function startCli(args: string[], dir = ''): Promise<Proc> {
  const child = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  child.once('exit', () => children.delete(child));
  const stderr: string[] = [];
  child.stderr?.on('data', (d) => stderr.push(String(d)));
  const url = await new Promise<string>((resolve, reject) => {
    let buf = '';
    child.stdout?.on('data', (d) => {
      buf += d;
      const m = buf.match(/http:\/\/127\.0\.0\.1:\d+/);
      if (m) resolve(m[0]);
    });
    child.once('exit', (code) => reject(new Error(`${args[0]} exited ${code}: ${stderr.join('')}`)));
  });
  return { child, url, dir, alive: true, inflight: 0, stderr };
}

/** SIGTERM and wait for the exit. */
export async function stop(p: Pick<Proc, 'child'>): Promise<void> {
  if (p.child.exitCode !== null || p.child.signalCode !== null) return;
  const exited = new Promise<void>((r) => p.child.once('exit', () => r()));
  p.child.kill('SIGTERM');
  await exited;
}

/** Every child this module started and that still runs. */
export function stopAll(): void {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGTERM');
}

export interface SimStats {
  requests: number;
  cacheReads: number;
  cacheWrites: number;
  tokensRead: number;
  tokensWritten: number;
}

export async function simStats(sim: string): Promise<SimStats> {
  const s = (await (await fetch(`${sim}/_sim/stats`)).json()) as SimStats;
  return {
    requests: s.requests,
    cacheReads: s.cacheReads,
    cacheWrites: s.cacheWrites,
    tokensRead: s.tokensRead,
    tokensWritten: s.tokensWritten,
  };
}

/** Sends one turn through a proxy with the official SDK, streamed; resolves with the response id. */
export async function sendTurn(url: string, t: Turn): Promise<string> {
  const client = new Anthropic({ apiKey: KEY, baseURL: url, maxRetries: 0 });
  const stream = client.messages.stream(t.body as unknown as Anthropic.MessageCreateParams, {
    headers: t.headers,
  });
  return (await stream.finalMessage()).id;
}

/** A process that keeps one CPU busy until it is stopped (a machine under load). */
export function cpuSpinner(): ChildProcess {
  const child = spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' });
  children.add(child);
  child.once('exit', () => children.delete(child));
  return child;
}

export interface FleetRunOptions {
  sim: string;
  conversations: number;
  turns: number;
  /** `memory` (one proxy) or a Redis URL (`proxies` of them share it). */
  state: 'memory' | string;
  proxies?: number;
  statePrefix?: string;
  /** Extra arguments for every proxy. */
  args?: string[];
  /** Keep one CPU busy beside the proxies while the traffic runs. */
  spinner?: boolean;
  /** Called as round `r` is sent (e.g. to pause Redis in the middle of the run). */
  onRound?: (round: number) => void;
  /**
   * Changes no fix keeps (so misses of other causes than a first request): every fourth conversation turns
   * extended thinking on from turn 4, the one after it sets `tool_choice` from turn 5.
   */
  changes?: boolean;
}

/** The turns of conversation `c` with the changes {@link FleetRunOptions.changes} describes. */
function withChanges(turns: Turn[], c: number): Turn[] {
  return turns.map((t) => {
    const body = structuredClone(t.body);
    if (c % 4 === 0 && t.turn >= 4) body.thinking = { type: 'enabled', budget_tokens: 1024 };
    if (c % 4 === 1 && t.turn >= 5) body.tool_choice = { type: 'any' };
    return { ...t, body };
  });
}

export interface FleetStateHealth {
  failedOpen: number;
  outages: number;
  notCommitted: number;
  unfixedCost?: { requests: number; rewrittenTokens: number; waste: number };
  feed?: { own: number; waiting: number };
}

export interface FleetRun {
  /** The simulator's counters for this run alone. */
  stats: SimStats;
  dirs: string[];
  /** Every proxy's live rows (this run's requests: each proxy's own). */
  rows: LiveRequest[];
  states: FleetStateHealth[];
  /** The proxies' /_cacheward/metrics text. */
  metrics: string[];
  elapsedMs: number;
}

/**
 * Resets the simulator, starts the proxies, sends round `r` (turn r of every conversation, all at once)
 * for r = 1..turns, turn r of conversation n through proxy (n + r) mod proxies; waits for every proxy's
 * live analysis to have its rows, then stops them.
 */
export async function runFleet(o: FleetRunOptions): Promise<FleetRun> {
  await fetch(`${o.sim}/_sim/reset`, { method: 'POST' });
  const n = o.state === 'memory' ? 1 : (o.proxies ?? 3);
  const procs: Proc[] = [];
  for (let i = 0; i < n; i++) {
    const dir = mkdtempSync(join(tmpdir(), `cacheward-fleet-run-${i}-`));
    const state =
      o.state === 'memory' ? [] : ['--state', o.state, '--state-prefix', o.statePrefix ?? 'fleet-run:'];
    procs.push(
      await startCli(
        [
          'proxy',
          '--port',
          '0',
          '--upstream',
          o.sim,
          '--capture',
          'hashes',
          '--dir',
          dir,
          '--fix',
          FIXES,
          ...state,
          ...(o.args ?? []),
        ],
        dir,
      ),
    );
  }
  const spinner = o.spinner ? cpuSpinner() : undefined;
  const traffic = Array.from({ length: o.conversations }, (_, c) => {
    const turns = claudeCodeConversation(c + 1, o.turns);
    return o.changes ? withChanges(turns, c) : turns;
  });
  const t0 = performance.now();
  try {
    for (let round = 1; round <= o.turns; round++) {
      o.onRound?.(round);
      await Promise.all(
        traffic.map((conv, c) => sendTurn((procs[(c + round) % n] as Proc).url, conv[round - 1] as Turn)),
      );
    }
  } finally {
    spinner?.kill('SIGKILL');
  }
  const elapsedMs = performance.now() - t0;
  const stats = await simStats(o.sim);
  const total = o.conversations * o.turns;
  const read = async () =>
    Promise.all(
      procs.map(async (p) => (await (await fetch(`${p.url}/_cacheward/state`)).json()) as LiveSnapshot),
    );
  const snaps = await waitFor(
    "every request in the proxies' live analyses",
    async () => {
      const now = await read();
      return now.reduce((x, s) => x + s.totals.requests, 0) >= total && now;
    },
    30_000,
  );
  const states = await Promise.all(
    procs.map(
      async (p) =>
        ((await (await fetch(`${p.url}/_cacheward/health`)).json()) as { state: FleetStateHealth }).state,
    ),
  );
  const metrics = await Promise.all(
    procs.map(async (p) => (await fetch(`${p.url}/_cacheward/metrics`)).text()),
  );
  for (const p of procs) await stop(p);
  return {
    stats,
    dirs: procs.map((p) => p.dir),
    rows: snaps.flatMap((s) => s.requests),
    states,
    metrics,
    elapsedMs,
  };
}

/** How many of `causes` there are of each (a cause-count table, for comparisons). */
export function countCauses(causes: Iterable<string | undefined>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const c of causes) if (c) out[c] = (out[c] ?? 0) + 1;
  return out;
}
