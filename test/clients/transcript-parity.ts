// Compares `cacheward report --json` on an agent's own transcripts with the same report on the proxy's captures
// of the same runs: requests, tokens, sessions, and every request's cause, matched call by call.

import { spawn } from 'node:child_process';
import type { AnalysisResult, AnalyzedRequest } from '../../src/analyze/analyze-captures.js';
import { type ReadRecord, readCaptures } from '../../src/capture/capture-reader.js';
import { builtCli } from '../suite.js';

const CLI = builtCli();

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * The built CLI as a child process, with exactly this environment (a HOME, a CODEX_HOME…), in `cwd`; ended
 * with SIGTERM after `timeoutMs` if given.
 */
export function cacheward(
  args: string[],
  env: Record<string, string> = {},
  options: { cwd?: string; timeoutMs?: number } = {},
): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', LANG: 'C.UTF-8', NO_COLOR: '1', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
      ...(options.cwd ? { cwd: options.cwd } : {}),
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => {
      stdout += d;
    });
    child.stderr.on('data', (d) => {
      stderr += d;
    });
    const timer = options.timeoutMs ? setTimeout(() => child.kill('SIGTERM'), options.timeoutMs) : undefined;
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** `report --json` through the CLI, parsed; throws with its stderr when it fails. */
export async function reportJson(args: string[], env: Record<string, string> = {}): Promise<AnalysisResult> {
  const r = await cacheward(['report', '--json', ...args], env);
  if (r.code !== 0) throw new Error(`cacheward report ${args.join(' ')} exited ${r.code}: ${r.stderr}`);
  return JSON.parse(r.stdout) as AnalysisResult;
}

/** One call as both reports saw it. */
export interface MatchedCall {
  capture: AnalyzedRequest;
  transcript: AnalyzedRequest | undefined;
}

const usageKey = (r: AnalyzedRequest) =>
  `${r.session}|${r.model}|${r.usage?.inputTotal}/${r.usage?.cacheRead}/${r.usage?.cacheWrite}/${r.usage?.output}`;

/**
 * Each capture row with the transcript row of the same call: the same session, model and usage (the
 * provider's own figures, in both), nearest in start time. A refused call (no usage) matches by time.
 */
export function matchCalls(captures: AnalysisResult, transcripts: AnalysisResult): MatchedCall[] {
  const left = [...transcripts.requests];
  return [...captures.requests]
    .sort((a, b) => a.time - b.time)
    .map((capture) => {
      let best = -1;
      for (let i = 0; i < left.length; i++) {
        const t = left[i] as AnalyzedRequest;
        if (usageKey(t) !== usageKey(capture)) continue;
        if (
          best < 0 ||
          Math.abs(t.time - capture.time) < Math.abs((left[best] as AnalyzedRequest).time - capture.time)
        )
          best = i;
      }
      const transcript = best >= 0 ? left.splice(best, 1)[0] : undefined;
      return { capture, transcript };
    });
}

/** The cause a report names for a call ("none" when it names no miss). */
export const causeOf = (r: AnalyzedRequest | undefined): string => r?.miss?.cause ?? 'none';

/** Every record of a capture folder or transcript folder, bodies rebuilt (in-process, the same reader). */
export async function recordsOf(path: string, warnings: string[] = []): Promise<ReadRecord[]> {
  const out: ReadRecord[] = [];
  for await (const r of readCaptures([path], { onWarning: (w) => warnings.push(w) })) out.push(r);
  return out;
}

/** Whether two records' prefixes have the same blocks: kinds, identities, cumulative keys and byte offsets. */
export function sameBlocks(a: ReadRecord, b: ReadRecord): { same: boolean; why?: string } {
  const x = a.record.prefix?.blocks ?? [];
  const y = b.record.prefix?.blocks ?? [];
  if (x.length !== y.length) return { same: false, why: `${x.length} blocks against ${y.length}` };
  for (let i = 0; i < x.length; i++) {
    const p = x[i];
    const q = y[i];
    if (!p || !q) continue;
    if (p.id !== q.id || p.hash !== q.hash || p.kind !== q.kind || p.at !== q.at || p.size !== q.size)
      return {
        same: false,
        why: `block ${i} (${p.level} ${p.kind}): ${JSON.stringify(p)} against ${JSON.stringify(q)}`,
      };
  }
  return { same: true };
}

/** The sums a report's sessions hold, per session. */
export function sessionTotals(
  r: AnalysisResult,
): Map<string, { requests: number; input: number; read: number; written: number }> {
  return new Map(
    r.sessions.map((s) => [
      s.session,
      { requests: s.requests, input: s.inputTokens, read: s.readTokens, written: s.writtenTokens },
    ]),
  );
}

/** |a − b| within 1% of the larger (and exact at zero). */
export function within1(a: number, b: number): boolean {
  return Math.abs(a - b) <= 0.01 * Math.max(Math.abs(a), Math.abs(b));
}
