// The live page, log and metrics: headless Chromium watches /_cacheward/ while official-SDK traffic flows
// through the proxy into the simulator, and the miss appears with the cause the report would name.

import { mkdtempSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { describe, expect, it } from 'vitest';
import { createProxy } from '../../src/proxy/create-proxy.js';
import { type LiveRequest, liveLogLine } from '../../src/proxy/live-analysis.js';
import { agentConversation, anthropicTool, appendUserTurn } from '../../src/sim/agent-conversation.js';
import { createSimulator } from '../../src/sim/simulator.js';
import { launchChromium, watchedPage } from '../headless-chromium.js';
import { API_KEY } from './helpers.js';

type Params = Anthropic.MessageCreateParamsNonStreaming;

describe('the live page', () => {
  it('shows each request as it finishes, and a miss with its cause, in headless Chromium', async () => {
    const sim = createSimulator();
    const simUrl = await sim.listen();
    const rows: LiveRequest[] = [];
    const proxy = createProxy({
      upstream: simUrl,
      dir: mkdtempSync(join(tmpdir(), 'cacheward-live-')),
      logger: { request: (r) => rows.push(r) },
    });
    await proxy.listen();
    const browser = await launchChromium();
    try {
      const { page, errors, foreign } = await watchedPage(browser, { width: 1200, height: 900 }, proxy.url);
      await page.goto(`${proxy.url}/_cacheward/`);
      await page.locator('#state', { hasText: 'live' }).waitFor({ timeout: 10_000 });

      // Traffic while the page watches: a turn, the next one, then one with a tool added mid-session.
      const client = new Anthropic({ apiKey: API_KEY, baseURL: proxy.url, maxRetries: 0 });
      let body = agentConversation({ turns: 3, seed: 71 });
      await client.messages.create(body as unknown as Params);
      body = appendUserTurn(body, 'next');
      await client.messages.stream(body as unknown as Params).finalMessage();
      body = appendUserTurn(body, 'with a new tool');
      body.tools = [...(body.tools as object[]), anthropicTool('mcp__live')];
      await client.messages.create(body as unknown as Params);

      const miss = page.locator('tr[data-cause="tools_changed"]');
      await miss.waitFor({ timeout: 10_000 });
      expect(await miss.textContent()).toContain('`mcp__live` was appended');
      expect(await page.locator('#requests tbody tr').count()).toBe(3);
      expect(await page.locator('#sessions tbody tr').count()).toBe(1);
      expect(await page.locator('#chart svg').count()).toBe(1);
      expect(errors).toEqual([]);
      expect(foreign).toEqual([]);
      const shot = join(process.cwd(), 'test-output', 'live-page.png');
      await page.screenshot({ path: shot, fullPage: true });
      expect(statSync(shot).size).toBeGreaterThan(10_000);

      // The same causes reach the log hook and the metrics.
      expect(rows.map((r) => r.cause)).toEqual(['cold_start', undefined, 'tools_changed']);
      // `cacheward proxy` prints this line per request on a terminal (`--log json` prints the row itself).
      expect(liveLogLine(rows[2] as LiveRequest)).toMatch(
        /^\d\d:\d\d:\d\d\.\d{3} c-cw_\S+ claude-opus-5 200 hit 0\.0% tools_changed \(-\$0\.\d{4}\) \$0\.\d{4}$/,
      );
      const metrics = await (await fetch(`${proxy.url}/_cacheward/metrics`)).text();
      expect(metrics).toContain('cacheward_misses_total{provider="anthropic",cause="tools_changed"} 1');
      const state = (await (await fetch(`${proxy.url}/_cacheward/state`)).json()) as {
        requests: LiveRequest[];
      };
      expect(state.requests).toHaveLength(3);
      // Same origin only: the page carries a nonce'd script policy and no CORS header.
      const res = await fetch(`${proxy.url}/_cacheward/`);
      expect(res.headers.get('content-security-policy')).toMatch(/script-src 'nonce-[^']+'/);
      expect(res.headers.get('access-control-allow-origin')).toBeNull();
    } finally {
      await browser.close();
      await proxy.close();
      await sim.close();
    }
  }, 60_000);
});
