import { existsSync, mkdtempSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PriceTable } from '../../src/analyze/price-table.js';
import { runBustSession } from '../../src/demo/bust-session.js';
import { analyzePaths } from '../../src/report/analyze-paths.js';
import { cli } from '../cli/run-cli.js';
import { CHROMIUM, launchChromium, watchedPage } from '../headless-chromium.js';

describe('cacheward report --html', () => {
  it('writes one self-contained page that renders in headless Chromium without console errors', async () => {
    expect(
      existsSync(CHROMIUM),
      'Debian chromium is installed by `npm test` (scripts/ensure-chromium.sh); install it with apt-get',
    ).toBe(true);
    const run = await runBustSession(mkdtempSync(join(tmpdir(), 'cacheward-html-')));
    const out = mkdtempSync(join(tmpdir(), 'cacheward-html-out-'));
    const html = join(out, 'report.html');
    const r = await cli(['report', run.dir, '--html', html]);
    expect(r.code).toBe(0);
    const browser = await launchChromium();
    try {
      const {
        page,
        errors,
        foreign: requests,
      } = await watchedPage(browser, { width: 1400, height: 1200 }, 'file:');
      await page.goto(`file://${html}`);
      expect(errors).toEqual([]);
      expect(requests).toEqual([]);
      // Charts are labelled in the page itself: no hovering needed to read them.
      const svgText = await page.locator('svg').allTextContents();
      expect(svgText.join(' ')).toContain('tools_changed');
      expect(svgText.join(' ')).toContain('read from cache');
      expect(await page.locator('h2').allTextContents()).toEqual([
        'Input tokens per request',
        'Waste by cause',
        'Sessions',
        'Requests by session',
        'Forks',
        'Misses, costliest first',
        'Prices used',
      ]);
      const shot = join(process.cwd(), 'test-output', 'report.png');
      await page.screenshot({ path: shot, fullPage: true });
      expect(statSync(shot).size).toBeGreaterThan(10_000);
    } finally {
      await browser.close();
    }
  }, 60_000);

  it('clips no label, has a tooltip on every bar, groups requests by session and reads at 760 px', async () => {
    const run = await runBustSession(mkdtempSync(join(tmpdir(), 'cacheward-html-')));
    const html = join(mkdtempSync(join(tmpdir(), 'cacheward-html-out-')), 'report.html');
    expect((await cli(['report', run.dir, '--html', html])).code).toBe(0);
    const result = await analyzePaths([run.dir], { prices: new PriceTable() });
    const browser = await launchChromium();
    try {
      const page = await browser.newPage({ viewport: { width: 760, height: 1000 } });
      await page.goto(`file://${html}`);
      // Usable at 760 px: the page itself never scrolls sideways.
      // The page runs in the browser: its DOM is reached through globalThis (no DOM types in this project).
      const [scrollW, clientW] = await page.evaluate(() => {
        const root = (globalThis as any).document.documentElement;
        return [root.scrollWidth, root.clientWidth];
      });
      expect(scrollW).toBeLessThanOrEqual(clientW);
      // No clipped labels: every text of every chart lies inside its chart (rotated names and values too).
      const outside = await page.evaluate(() =>
        [...(globalThis as any).document.querySelectorAll('svg')].flatMap((svg: any) => {
          const box = svg.getBoundingClientRect();
          return [...svg.querySelectorAll('text')]
            .map((t: any) => ({ t: t.textContent as string, r: t.getBoundingClientRect() }))
            .filter(
              ({ r }: any) =>
                r.left < box.left - 0.5 ||
                r.right > box.right + 0.5 ||
                r.top < box.top - 0.5 ||
                r.bottom > box.bottom + 0.5,
            )
            .map(({ t }: any) => t);
        }),
      );
      expect(outside).toEqual([]);
      // A tooltip on every bar: one per request with cache fields, one per cause with waste.
      const charted = result.requests.filter((r) => r.usage?.cacheReported).length;
      const tips = await page.locator('svg g.bar > title').allTextContents();
      expect(tips.length).toBe(charted + result.byCause.filter((c) => c.cause !== 'cold_start').length);
      expect(
        tips.some((t) => /^main, turn 3, \d\d:\d\d:\d\d\.\d{3} UTC/.test(t) && t.includes('tools_changed')),
      ).toBe(true);
      const tip = page.locator('svg g.bar').first();
      await tip.hover();
      // Requests grouped by session: one collapsible table per session, in the chart one labelled group each.
      const summaries = await page.locator('details > summary').allTextContents();
      expect(summaries.map((x) => x.split(':')[0]).sort()).toEqual(
        result.sessions.map((x) => x.session).sort(),
      );
      await page.locator('details > summary', { hasText: 'main:' }).click();
      expect(await page.locator('details[open] tr').count()).toBe(
        1 + (result.sessions.find((x) => x.session === 'main')?.requests ?? 0),
      );
      // Forks named by session and turn, not by raw ids.
      const forks = await page.locator('h2:has-text("Forks") + ul > li').allTextContents();
      const review = result.requests.find((x) => x.miss?.cause === 'fork_diverged');
      const parent = result.requests.find((x) => x.id === review?.fork?.parent);
      expect(parent).toBeDefined();
      expect(forks).toContain(
        `main turn 1 forked from ${parent?.session} turn ${parent?.turn} — ${review?.miss?.cause}`,
      );
      expect(forks.join(' ')).not.toMatch(/cw_/);
      // Every miss line names its session, with the time to the millisecond.
      const misses = await page.locator('h2:has-text("Misses") + ul > li').allTextContents();
      expect(misses.length).toBeGreaterThan(0);
      for (const m of misses) expect(m).toMatch(/^[\w-]+, turn \d+, \d\d:\d\d:\d\d\.\d{3} — /);
      const shot = join(process.cwd(), 'test-output', 'report-760.png');
      await page.screenshot({ path: shot, fullPage: true });
      expect(statSync(shot).size).toBeGreaterThan(10_000);
    } finally {
      await browser.close();
    }
  }, 60_000);
});
