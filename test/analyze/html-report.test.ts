import { existsSync, mkdtempSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { runBustSession } from '../../src/demo/bust-session.js';
import { cli } from '../cli/run-cli.js';

const CHROMIUM = '/usr/bin/chromium';

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
    const browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        '--no-sandbox',
        '--headless',
        '--disable-gpu',
        '--disable-background-networking',
        '--disable-component-update',
        '--no-first-run',
        '--disable-sync',
      ],
    });
    try {
      const page = await browser.newPage({ viewport: { width: 1400, height: 1200 } });
      const errors: string[] = [];
      const requests: string[] = [];
      page.on('console', (m) => {
        if (m.type() === 'error') errors.push(m.text());
      });
      page.on('pageerror', (e) => errors.push(String(e)));
      page.on('request', (req) => {
        if (!req.url().startsWith('file:')) requests.push(req.url());
      });
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
});
