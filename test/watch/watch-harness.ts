// What the `cacheward watch` tests share: the built CLI started as a real process (its URL read from its first
// stdout line), its state and metrics read over HTTP, waits on conditions with a deadline (never a fixed
// sleep), and the comparison of its rows with `cacheward report --json` on the same transcripts.

import { type ChildProcess, spawn } from 'node:child_process';
import { expect } from 'vitest';
import type { AnalysisResult } from '../../src/analyze/analyze-captures.js';
import type { LiveSnapshot } from '../../src/proxy/live-analysis.js';
import type { WatchHealth } from '../../src/watch/create-watch.js';
import { builtCli } from '../suite.js';
import { waitFor as waitOn } from '../wait-for.js';

const CLI = builtCli();

export interface WatchProcess {
  url: string;
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  /** SIGTERM, then resolves with the exit code once it ended. */
  stop(): Promise<number | null>;
  /** Resolves with the exit code once it ended (sends nothing). */
  exited: Promise<number | null>;
}

/** `cacheward watch ARGS` with exactly this environment, once it printed its URL. */
export function startWatchCli(args: string[], env: Record<string, string> = {}): Promise<WatchProcess> {
  const child = spawn(process.execPath, [CLI, 'watch', '--port', '0', ...args], {
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', LANG: 'C.UTF-8', NO_COLOR: '1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stderr?.on('data', (d) => {
    err += d;
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`cacheward watch printed no URL within 15 s: ${err}`));
    }, 15_000);
    child.stdout?.on('data', (d) => {
      const first = !out;
      out += d;
      if (!first) return;
      const m = out.match(/^cacheward watch listening on (http:\/\/127\.0\.0\.1:\d+)\n/);
      clearTimeout(timer);
      if (!m) {
        reject(new Error(`the first stdout line is not the URL: ${out}`));
        return;
      }
      resolve({
        url: m[1] as string,
        child,
        stdout: () => out,
        stderr: () => err,
        exited,
        stop: async () => {
          if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
          return exited;
        },
      });
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`cacheward watch exited ${code} before printing its URL: ${err}`));
    });
  });
}

export async function getJson<T>(url: string): Promise<T> {
  const res = await fetch(url);
  if (!res.ok) throw new Error(`GET ${url}: ${res.status}`);
  return (await res.json()) as T;
}

export const stateOf = (url: string) => getJson<LiveSnapshot>(`${url}/_cacheward/state`);
export const healthOf = (url: string) => getJson<WatchHealth>(`${url}/_cacheward/health`);

/** `cacheward_misses_total` by cause, and `cacheward_requests_total` summed, from `/_cacheward/metrics`. */
export async function metricsOf(url: string): Promise<{ requests: number; misses: Map<string, number> }> {
  const text = await (await fetch(`${url}/_cacheward/metrics`)).text();
  const misses = new Map<string, number>();
  let requests = 0;
  for (const line of text.split('\n')) {
    const miss = /^cacheward_misses_total\{provider="[^"]*",cause="([^"]+)"\} (\d+)$/.exec(line);
    if (miss) misses.set(miss[1] as string, (misses.get(miss[1] as string) ?? 0) + Number(miss[2]));
    const req = /^cacheward_requests_total\{[^}]*\} (\d+)$/.exec(line);
    if (req) requests += Number(req[1]);
  }
  return { requests, misses };
}

/** Waits for what a watch shows, 30 s at most (the agents write at their own pace). */
export function waitFor<T>(what: string, check: () => Promise<T | undefined>, ms = 30_000): Promise<T> {
  return waitOn(what, check, ms);
}

/** Waits until the watch shows `requests` calls, then returns its state. */
export function stateWith(url: string, requests: number, ms?: number): Promise<LiveSnapshot> {
  return waitFor(
    `${requests} calls on ${url}/_cacheward/state`,
    async () => {
      const s = await stateOf(url);
      return s.totals.requests >= requests ? s : undefined;
    },
    ms,
  );
}

/**
 * The watch's rows are the report's requests, call by call (same id, session, relation, turn, tokens and
 * cause), and its miss metrics the report's causes (cold starts are not counted as misses there).
 */
export async function expectSameAsReport(url: string, report: AnalysisResult): Promise<void> {
  const state = await stateWith(url, report.totals.requests);
  expect(state.totals.requests).toBe(report.totals.requests);
  const rows = new Map(state.requests.map((r) => [r.id, r]));
  for (const r of report.requests) {
    const row = rows.get(r.id);
    expect(row, `${r.id} (${r.session} turn ${r.turn})`).toBeDefined();
    const at = `${r.session} turn ${r.turn}`;
    expect(row?.session, at).toBe(r.session);
    expect(row?.relation, at).toBe(r.relation);
    expect(row?.turn, at).toBe(r.turn);
    expect(row?.inputTokens, at).toBe(r.usage?.inputTotal ?? 0);
    expect(row?.readTokens, at).toBe(r.usage?.cacheRead ?? 0);
    expect(row?.writtenTokens, at).toBe(r.usage?.cacheWrite ?? 0);
    expect(row?.cause ?? 'none', at).toBe(r.miss?.cause ?? 'none');
  }
  expect(state.totals.inputTokens).toBe(report.totals.inputTokens);
  expect(state.totals.readTokens).toBe(report.totals.readTokens);
  const metrics = await metricsOf(url);
  expect(metrics.requests).toBe(report.totals.requests);
  const expected = new Map(
    report.byCause.filter((c) => c.cause !== 'cold_start' && c.misses).map((c) => [c.cause, c.misses]),
  );
  expect(Object.fromEntries(metrics.misses)).toEqual(Object.fromEntries(expected));
}
