// `cacheward report DIR1 DIR2 DIR3` reads a fleet's captures as one traffic: the same report as one proxy
// that saw it all (a conversation split across proxies is one conversation, records in time order), and a
// capture named twice is counted once.

import { copyFileSync, mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { AnalysisResult } from '../../src/analyze/analyze-captures.js';
import { PriceTable } from '../../src/analyze/price-table.js';
import { VirtualClock } from '../../src/core/clock.js';
import { createProxy } from '../../src/proxy/create-proxy.js';
import { analyzePaths } from '../../src/report/analyze-paths.js';
import { createSimulator } from '../../src/sim/simulator.js';
import { cli } from '../cli/run-cli.js';
import { claudeCodeConversation, type Turn } from '../fleet/claude-code-traffic.js';

/** Three labelled Claude Code sessions and one with no label at all; turns interleaved. */
function traffic(): Turn[] {
  const convs = [1, 2, 3, 4].map((n) => claudeCodeConversation(n, 6));
  for (const t of convs[3] ?? []) {
    t.headers = {};
    delete t.body.metadata;
  }
  const out: Turn[] = [];
  for (let turn = 0; turn < 6; turn++) for (const c of convs) out.push(c[turn] as Turn);
  return out;
}

/** Sends the traffic round-robin over `n` proxies (each with its own folder and memory) on one virtual clock. */
async function capture(n: number): Promise<string[]> {
  const clock = new VirtualClock(Date.UTC(2026, 10, 30, 9, 0, 0));
  const sim = createSimulator({ clock });
  const simUrl = await sim.listen();
  const root = mkdtempSync(join(tmpdir(), `cacheward-fleet-report-${n}-`));
  const proxies = Array.from({ length: n }, (_, i) =>
    createProxy({
      upstream: simUrl,
      clock,
      dir: join(root, `proxy-${i}`),
      capture: 'hashes',
      logger: {},
    }),
  );
  await Promise.all(proxies.map((p) => p.listen()));
  try {
    let i = 0;
    for (const t of traffic()) {
      clock.advance(15_000);
      const p = proxies[i++ % n] as (typeof proxies)[number];
      const res = await fetch(`${p.url}/v1/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': 'k', ...t.headers },
        body: JSON.stringify(t.body),
      });
      expect(res.status).toBe(200);
      await res.text();
    }
    for (const p of proxies) await p.flush();
  } finally {
    for (const p of proxies) await p.close();
    await sim.close();
  }
  return proxies.map((_, i) => join(root, `proxy-${i}`));
}

async function report(paths: string[]): Promise<{ result: AnalysisResult; stderr: string }> {
  const r = await cli(['report', '--json', ...paths]);
  expect(r.code, r.stderr).toBe(0);
  return { result: JSON.parse(r.stdout) as AnalysisResult, stderr: r.stderr };
}

/** What must not depend on which proxy saw a request: everything but request ids. */
function shape(r: AnalysisResult) {
  const names = new Map<string, string>();
  const name = (s: string) => {
    if (!s.startsWith('c-')) return s;
    if (!names.has(s)) names.set(s, `conversation-${names.size + 1}`);
    return names.get(s) as string;
  };
  return {
    totals: r.totals,
    byCause: r.byCause,
    sessions: r.sessions.map((s) => ({ ...s, session: name(s.session) })),
    requests: r.requests.map((q) => ({
      session: name(q.session),
      relation: q.relation,
      turn: q.turn,
      time: q.time,
      cause: q.miss?.cause,
      rewritten: q.miss?.rewrittenTokens,
    })),
  };
}

describe('report over several proxies', () => {
  it('is the report of one proxy that saw all of it, and counts a capture named twice once', async () => {
    const [one] = await capture(1);
    const fleet = await capture(3);
    const single = await report([one as string]);
    const merged = await report(fleet);
    expect(shape(merged.result)).toEqual(shape(single.result));
    // The traffic had misses with causes, four sessions (one unlabelled) and every turn in time order.
    expect(merged.result.totals.requests).toBe(24);
    expect(merged.result.sessions).toHaveLength(4);
    expect(merged.result.byCause.map((c) => c.cause)).toContain('tools_changed');
    const times = merged.result.requests.map((q) => q.time);
    expect(times).toEqual([...times].sort((a, b) => a - b));
    expect(merged.result.generatedFrom.files).toBe(3);
    // Merged by time, not folder after folder: even a reorder window of two records is enough.
    const tight = await analyzePaths(fleet, { prices: new PriceTable(), window: 2 });
    expect(shape(tight)).toEqual(shape(single.result));

    // Every folder named again, and one file copied into another folder: still each record once.
    const first = fleet[0] as string;
    const file = readdirSync(first).find((f) => f.startsWith('capture-')) as string;
    const copyDir = mkdtempSync(join(tmpdir(), 'cacheward-fleet-copy-'));
    copyFileSync(join(first, file), join(copyDir, file));
    const twice = await report([...fleet, ...fleet, join(first, file), copyDir]);
    expect(shape(twice.result)).toEqual(shape(single.result));
    expect(twice.stderr).toMatch(
      /8 records appeared in more than one file \(captures or transcripts\) and were counted once/,
    );
  });
});
