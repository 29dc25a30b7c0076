import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import type { AnalysisResult } from '../../src/analyze/analyze-captures.js';
import { formatUsd } from '../../src/analyze/describe-miss.js';
import { PriceTable } from '../../src/analyze/price-table.js';
import { checkThresholds, parseThreshold } from '../../src/cli/fail-on.js';
import { signedUsd } from '../../src/cli/signed-usd.js';
import { runBustSession } from '../../src/demo/bust-session.js';
import { analyzePaths } from '../../src/report/analyze-paths.js';
import { loadPriceFile } from '../../src/report/price-file.js';
import { type Captured, fullCapture } from './captures.js';
import { cli } from './run-cli.js';

let demo: string;
let result: AnalysisResult;
let full: Captured;

beforeAll(async () => {
  demo = (await runBustSession(mkdtempSync(join(tmpdir(), 'cacheward-ci-')))).dir;
  result = await analyzePaths([demo], { prices: new PriceTable() });
  full = await fullCapture();
}, 60_000);

describe('report --fail-on, for CI', () => {
  it('exits 0 when every threshold holds, 1 when one is crossed, and says which', async () => {
    // The demo session wastes between $0.50 and $5.
    expect(result.totals.waste).toBeLessThan(5);
    const ok = await cli(['report', demo, '--fail-on', 'waste>5', '--fail-on', 'hit-rate<40']);
    expect(ok.code).toBe(0);
    expect(ok.stdout).toContain('fail-on waste>$5.00: holds');
    expect(ok.stdout).toContain('fail-on hit-rate<40.0%: holds');
    const bad = await cli(['report', demo, '--fail-on', 'waste>0.5', '--fail-on', 'hit-rate<80']);
    expect(bad.code).toBe(1);
    expect(result.totals.waste).toBeGreaterThan(0.5);
    expect(bad.stdout).toContain(`fail-on waste>$0.50: crossed by the run ${formatUsd(result.totals.waste)}`);
    expect(bad.stdout).toContain(
      `fail-on hit-rate<80.0%: crossed by the run ${((result.totals.hitRate ?? 0) * 100).toFixed(1)}%`,
    );
    // Dollars may carry a sign, percentages a percent sign.
    expect((await cli(['report', demo, '--fail-on', 'waste > $0.5'])).code).toBe(1);
    expect((await cli(['report', demo, '--fail-on', 'hit-rate<40%'])).code).toBe(0);
  });

  it('checks every session with --per-session and names the ones that cross', async () => {
    const main = result.sessions.find((s) => s.session === 'main');
    expect(main?.waste).toBeGreaterThan(0.5);
    const r = await cli(['report', demo, '--per-session', '--fail-on', 'waste>0.5']);
    expect(r.code).toBe(1);
    expect(r.stdout).toContain(
      `fail-on waste>$0.50 (per session): crossed by session main ${formatUsd(main?.waste ?? 0)}`,
    );
    // Over the whole run the hit rate is above 40%, yet two sessions are below it.
    expect((await cli(['report', demo, '--fail-on', 'hit-rate<40'])).code).toBe(0);
    const h = await cli(['report', demo, '--per-session', '--fail-on', 'hit-rate<40']);
    expect(h.code).toBe(1);
    expect(h.stdout).toMatch(/crossed by session summary-standalone 0\.0%.*session classifier 0\.0%/);
  });

  it('keeps stdout one JSON document with --json, the verdicts on stderr', async () => {
    const r = await cli(['report', demo, '--json', '--fail-on', 'misses>3']);
    expect(r.code).toBe(1);
    expect(JSON.parse(r.stdout).version).toBe(1);
    expect(r.stderr).toMatch(/fail-on misses>3: crossed by the run \d+/);
  });

  it('refuses a threshold it cannot parse, and one it cannot check', async () => {
    for (const bad of ['waste', 'cost>5', 'hit-rate<180', 'waste=>5']) {
      const r = await cli(['report', demo, '--fail-on', bad]);
      expect(r.code, bad).toBe(2);
      expect(r.stderr.split('\n')).toHaveLength(1);
    }
    const alone = await cli(['report', demo, '--per-session']);
    expect(alone.code).toBe(2);
    // The example it gives runs as pasted into a shell (the > quoted).
    expect(alone.stderr).toContain("--fail-on 'waste>5' --per-session");
    const unpriced = await analyzePaths([demo], { prices: new PriceTable([], []) });
    const [v] = checkThresholds(unpriced, [parseThreshold('waste>1')], false);
    expect(v?.unchecked).toContain('no request is priced');
  });
});

describe('report output', () => {
  it('names the session of every miss line, with the time to the millisecond', async () => {
    const r = await cli(['report', demo, '--misses', '50']);
    const lines = r.stdout.split('\n');
    const at = lines.findIndex((l) => l.startsWith('costliest misses'));
    const misses = lines.slice(at + 1).filter((l) => l.startsWith('  '));
    expect(misses.length).toBe(result.misses.filter((m) => m.cause !== 'cold_start').length);
    for (const m of misses) expect(m).toMatch(/^ {2}[\w-]+, turn \d+, \d\d:\d\d:\d\d\.\d{3} — /);
    // Two requests sent within one second keep their order.
    const concurrent = result.misses.find((m) => m.cause === 'concurrent');
    expect(concurrent).toBeDefined();
    expect(r.stdout).toContain(
      `main, turn ${concurrent?.turn}, ${new Date(concurrent?.time ?? 0).toISOString().slice(11, 23)}`,
    );
  });

  it('validates --misses', async () => {
    for (const bad of ['abc', '-1', '2.5']) {
      const r = await cli(['report', demo, '--misses', bad]);
      expect(r.code, bad).toBe(2);
      expect(r.stderr).toContain(`--misses ${bad}: not a whole number`);
    }
  });

  it('reads the same capture once when given a folder and a file in it', async () => {
    const file = (await import('node:fs')).readdirSync(demo).find((f) => f.startsWith('capture-')) as string;
    const twice = JSON.parse((await cli(['report', '--json', demo, join(demo, file), demo])).stdout);
    expect(twice.totals.requests).toBe(result.totals.requests);
    expect(twice.generatedFrom.files).toBe(1);
  });
});

describe('show and diff on capture records', () => {
  it('prints the exact request body of a record', async () => {
    const r = await cli(['show', full.ids[2] as string, '--dir', full.dir]);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual(full.bodies[2]);
    const rec = await cli(['show', full.ids[0] as string, '--dir', full.dir, '--record']);
    const record = JSON.parse(rec.stdout);
    expect(record.id).toBe(full.ids[0]);
    expect(record.route).toBe('/v1/messages');
    expect(JSON.stringify(record)).not.toContain('cacheward-test-anthropic-key');
  });

  it('says what is wrong with an unknown id, a malformed one, and a hashes-mode record', async () => {
    const missing = await cli(['show', 'cw_0000000000', '--dir', full.dir]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/cw_0000000000: no such capture record in .* \(3 records in 1 file\)/);
    expect((await cli(['show', 'not-an-id', '--dir', full.dir])).code).toBe(2);
    const hashed = result.requests[0]?.id as string;
    const h = await cli(['show', hashed, '--dir', demo]);
    expect(h.code).toBe(2);
    expect(h.stderr).toContain('captured in hashes mode');
    expect(h.stderr).toContain('--capture full');
  });

  it('diffs two records by id, as it diffs their bodies written to files', async () => {
    const [a, b, c] = full.ids as [string, string, string];
    const byId = await cli(['diff', b, c, '--dir', full.dir]);
    expect(byId.code).toBe(1);
    expect(byId.stdout.split('\n')[0]).toMatch(/^tools diverge at index 2: `mcp__db__query` was inserted/);
    const dir = mkdtempSync(join(tmpdir(), 'cacheward-diff-ids-'));
    writeFileSync(join(dir, 'b.json'), JSON.stringify(full.bodies[1]));
    writeFileSync(join(dir, 'c.json'), JSON.stringify(full.bodies[2]));
    const byFile = await cli(['diff', join(dir, 'b.json'), join(dir, 'c.json')]);
    expect(byId.stdout).toBe(byFile.stdout);
    const same = await cli(['diff', a, b, '--dir', full.dir]);
    expect(same.code).toBe(0);
    // A record id and a file mix.
    expect((await cli(['diff', b, join(dir, 'c.json'), '--dir', full.dir])).code).toBe(1);
  });
});

describe('prices', () => {
  it('documents the price file in --help and prints an example that report accepts', async () => {
    const help = await cli(['report', '--help']);
    expect(help.stdout).toContain('"write5m": N');
    expect(help.stdout).toContain('cacheward prices --example');
    const ex = await cli(['prices', '--example']);
    expect(ex.code).toBe(0);
    const dir = mkdtempSync(join(tmpdir(), 'cacheward-prices-'));
    const file = join(dir, 'prices.json');
    writeFileSync(file, ex.stdout);
    const rows = await loadPriceFile(file);
    expect(rows.map((r) => r.model)).toEqual(['claude-opus-5', 'gpt-5.6']);
    expect((await cli(['report', demo, '--prices', file])).code).toBe(0);
    const table = await cli(['prices', '--prices', file]);
    expect(table.stdout).toMatch(/gpt-5\.6 +\$1\.00/);
  });
});

describe('whatif', () => {
  it('puts the sign before the dollar and says why its modelled figure is not the reported spend', async () => {
    expect(signedUsd(-0.005)).toBe('-$0.0050');
    expect(signedUsd(1.2)).toBe('+$1.20');
    const r = await cli(['whatif', demo, '--ttl', '1h']);
    expect(r.code).toBe(0);
    expect(r.stdout).not.toMatch(/\$-/);
    expect(r.stdout).toMatch(/difference: [+-]\$\d/);
    expect(r.stdout).toContain(`why this is not the report's spend (${formatUsd(result.totals.cost)})`);
    expect(r.stdout).toMatch(/Modelled minus reported: [+-]?\$[\d.]+/);
  });
});
