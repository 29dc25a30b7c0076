// Debian's Chromium, headless, for the page tests (the HTML report, the live page): one launch, and a page
// that collects console errors and every request that leaves the page's own origin.

import { existsSync } from 'node:fs';
import { type Browser, chromium, type Page } from 'playwright-core';
import { fullSuiteOnly } from './suite.js';

export const CHROMIUM = '/usr/bin/chromium';

/** Launches Chromium with the flags this machine needs (no sandbox as root, no background networking). */
export async function launchChromium(): Promise<Browser> {
  fullSuiteOnly('Chromium');
  if (!existsSync(CHROMIUM))
    throw new Error(
      'Debian chromium is installed by `npm test` (scripts/ensure-chromium.sh); install it with apt-get',
    );
  return chromium.launch({
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
}

/** A page whose console errors and requests outside `ownOrigin` are collected. */
export async function watchedPage(
  browser: Browser,
  viewport: { width: number; height: number },
  ownOrigin: string,
): Promise<{ page: Page; errors: string[]; foreign: string[] }> {
  const page = await browser.newPage({ viewport });
  const errors: string[] = [];
  const foreign: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(m.text());
  });
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('request', (r) => {
    if (!r.url().startsWith(ownOrigin)) foreign.push(r.url());
  });
  return { page, errors, foreign };
}
