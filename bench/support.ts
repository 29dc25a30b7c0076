// Shared pieces of the benchmarks: start the built CLI as a child process, make agent bodies of a size,
// percentiles and the machine line. Bench-only; nothing in src/ may import it.

import { type ChildProcess, spawn } from 'node:child_process';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { agentConversation } from '../src/sim/agent-conversation.js';

export type Json = Record<string, unknown>;

const bin = join(import.meta.dirname, '../dist/cli/bin.js');

/**
 * Starts `cacheward <args>` from dist/ (or another built `bin`, for a before/after run) and resolves with
 * the loopback URL it prints. `node` are options for Node itself (e.g. `--import` a probe).
 */
export async function startCli(
  args: string[],
  options: { bin?: string; node?: string[]; env?: NodeJS.ProcessEnv } = {},
): Promise<{ child: ChildProcess; url: string }> {
  // CACHEWARD_BENCH_NODE_ARGS (e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof") is passed to every child started.
  const extra = process.env.CACHEWARD_BENCH_NODE_ARGS?.split(' ').filter(Boolean) ?? [];
  return startNode([...extra, ...(options.node ?? []), options.bin ?? bin, ...args], options.env);
}

/** Starts `node <args>` and resolves with the loopback URL it prints. */
export function startNode(
  args: string[],
  env?: NodeJS.ProcessEnv,
): Promise<{ child: ChildProcess; url: string }> {
  return startCommand(process.execPath, args, env);
}

/** Starts `command <args>` (a server: another proxy, a peer) and resolves with the loopback URL it prints. */
export async function startCommand(
  command: string,
  args: string[],
  env?: NodeJS.ProcessEnv,
): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(command, args, {
    stdio: ['ignore', 'pipe', 'inherit'],
    ...(env ? { env: { ...process.env, ...env } } : {}),
  });
  const url = await new Promise<string>((resolve, reject) => {
    let buf = '';
    child.stdout?.on('data', (d) => {
      buf += d;
      const m = buf.match(/http:\/\/127\.0\.0\.1:\d+/);
      if (m) resolve(m[0]);
    });
    child.once('exit', (code) => reject(new Error(`${args.join(' ')} exited ${code}`)));
  });
  return { child, url };
}

/** The smallest generated agent conversation (by whole turns) whose JSON is at least `bytes` long. */
export function bodyOfSize(bytes: number, seed: number): Json {
  let turns = 2;
  let body = agentConversation({ turns, seed });
  while (Buffer.byteLength(JSON.stringify(body)) < bytes) body = agentConversation({ turns: ++turns, seed });
  return body;
}

/** Least-squares slope of y over x. */
export function slope(xs: number[], ys: number[]): number {
  const mx = xs.reduce((a, b) => a + b, 0) / xs.length;
  const my = ys.reduce((a, b) => a + b, 0) / ys.length;
  let num = 0;
  let den = 0;
  xs.forEach((x, i) => {
    num += (x - mx) * ((ys[i] as number) - my);
    den += (x - mx) ** 2;
  });
  return den ? num / den : 0;
}

/** The `p` quantile (0..1) of `values` (sorted or not). */
export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? 0;
}

/** The first line every benchmark prints: what ran it. */
export function machineLine(bench: string): string {
  return `cacheward bench/${bench}: node ${process.version}, ${cpus()[0]?.model ?? 'cpu'}, ${cpus().length} cores`;
}

/** Multiplies every bench phase's duration: `BENCH_SCALE=0.3` for a quick look (default 1). */
export const SCALE = Math.max(0.05, Number(process.env.BENCH_SCALE ?? 1) || 1);

/** Where bench/loop-probe.mjs writes a process's event-loop figures (read with {@link readLoopProbe}). */
export function loopProbeArgs(file: string): { node: string[]; env: NodeJS.ProcessEnv } {
  return {
    node: ['--import', join(import.meta.dirname, 'loop-probe.mjs')],
    env: { CACHEWARD_LOOP_PROBE: file },
  };
}

/** Asks a probed child for its event-loop delay since the last ask (max and p99, ms), and resets it. */
export async function readLoopProbe(
  child: ChildProcess,
  file: string,
): Promise<{ max: number; p99: number }> {
  const { readFile, rm } = await import('node:fs/promises');
  await rm(file, { force: true });
  child.kill('SIGUSR2');
  for (let i = 0; i < 200; i++) {
    try {
      return JSON.parse(await readFile(file, 'utf8')) as { max: number; p99: number };
    } catch {
      await new Promise((r) => setTimeout(r, 10));
    }
  }
  throw new Error('the event-loop probe did not answer');
}
