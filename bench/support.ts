// Shared pieces of the benchmarks: start the built CLI as a child process, make agent bodies of a size,
// percentiles and the machine line. Bench-only; nothing in src/ may import it.

import { type ChildProcess, spawn } from 'node:child_process';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { agentConversation } from '../src/demo/agent-conversation.js';

export type Json = Record<string, unknown>;

const bin = join(import.meta.dirname, '../dist/cli/bin.js');

/** Starts `cacheward <args>` from dist/ and resolves with the loopback URL it prints. */
export async function startCli(args: string[]): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, [bin, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  const url = await new Promise<string>((resolve, reject) => {
    let buf = '';
    child.stdout?.on('data', (d) => {
      buf += d;
      const m = buf.match(/http:\/\/127\.0\.0\.1:\d+/);
      if (m) resolve(m[0]);
    });
    child.once('exit', (code) => reject(new Error(`${args[0]} exited ${code}`)));
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

/** The `p` quantile (0..1) of `values` (sorted or not). */
export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? 0;
}

/** The first line every benchmark prints: what ran it. */
export function machineLine(bench: string): string {
  return `cacheward bench/${bench}: node ${process.version}, ${cpus()[0]?.model ?? 'cpu'}, ${cpus().length} cores`;
}
