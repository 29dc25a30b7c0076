// Test harness for the proxy: a simulator upstream and a proxy in front of it on one virtual clock,
// capture into a fresh 0700 folder, and the official SDK clients pointed at either.

import { mkdtempSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll } from 'vitest';
import { type ReadRecord, readCaptures } from '../../src/capture/capture-reader.js';
import { VirtualClock } from '../../src/core/clock.js';
import { type CachewardProxy, createProxy, type ProxyOptions } from '../../src/proxy/create-proxy.js';
import type { LiveRequest } from '../../src/proxy/live-analysis.js';
import { createSimulator, type Simulator, type SimulatorOptions } from '../../src/sim/simulator.js';

export const API_KEY = 'cacheward-test-anthropic-key-0123456789abcdefghijklmnop';
export const OPENAI_KEY = 'cacheward-test-openai-key-0123456789abcdefghijk';

export interface ProxyHarness {
  sim: Simulator;
  simUrl: string;
  proxy: CachewardProxy;
  dir: string;
  clock: VirtualClock;
  anthropic(direct?: boolean): Anthropic;
  openai(direct?: boolean): OpenAI;
  records(): Promise<ReadRecord[]>;
  warnings: string[];
}

export async function startProxy(
  options: Partial<ProxyOptions> = {},
  simOptions: SimulatorOptions = {},
): Promise<ProxyHarness> {
  const clock = new VirtualClock();
  const sim = createSimulator({ clock, ...simOptions });
  const simUrl = await sim.listen();
  afterAll(() => sim.close());
  const { proxy, dir, warnings, records } = await capturingProxy({ upstream: simUrl, clock, ...options });
  return {
    sim,
    simUrl,
    proxy,
    dir,
    clock,
    warnings,
    anthropic: (direct = false) =>
      new Anthropic({ apiKey: API_KEY, baseURL: direct ? simUrl : proxy.url, maxRetries: 0 }),
    openai: (direct = false) =>
      new OpenAI({ apiKey: OPENAI_KEY, baseURL: `${direct ? simUrl : proxy.url}/v1`, maxRetries: 0 }),
    records,
  };
}

/** A listening proxy that captures everything (`full`), its log lines kept; closed after the file's tests. */
export interface CapturingProxy {
  proxy: CachewardProxy;
  dir: string;
  /** What the proxy logged (info, warn and error lines). */
  logs: string[];
  /** What reading the captures warned about. */
  warnings: string[];
  /** Every capture record so far, after a flush. */
  records(): Promise<ReadRecord[]>;
}

/** {@link CapturingProxy} in front of `options.upstream`, in a fresh capture folder unless `options.dir`. */
export async function capturingProxy(
  options: Partial<ProxyOptions> & { upstream: string },
): Promise<CapturingProxy> {
  const dir = options.dir ?? join(mkdtempSync(join(tmpdir(), 'cacheward-proxy-')), 'captures');
  const logs: string[] = [];
  const warnings: string[] = [];
  const proxy = createProxy({
    dir,
    capture: 'full',
    logger: { info: (l) => logs.push(l), warn: (l) => logs.push(l), error: (l) => logs.push(l) },
    ...options,
  });
  await proxy.listen();
  afterAll(() => proxy.close());
  return {
    proxy,
    dir,
    logs,
    warnings,
    async records() {
      await proxy.flush();
      const out: ReadRecord[] = [];
      for await (const r of readCaptures([dir], { onWarning: (w) => warnings.push(w) })) out.push(r);
      return out;
    },
  };
}

/** Resolves with the next request the proxy's live analysis names (every finished API request is one). */
export function nextLiveRequest(proxy: CachewardProxy): Promise<LiveRequest> {
  return new Promise((resolve) => {
    const off = proxy.live.subscribe((row) => {
      off();
      resolve(row);
    });
  });
}

/** Starts `server` on a loopback port; its close (connections cut first) is pushed onto `closers`. */
export async function listenOnLoopback(
  server: Server,
  closers: Array<() => Promise<unknown>>,
): Promise<string> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  closers.push(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}
