// One task set under two system prompts (an eval's A/B), no session label: the same user messages, the same
// tools, another system prompt. Two conversations, each reading its own cache: no invented miss or waste.

import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PriceTable } from '../../src/analyze/price-table.js';
import { VirtualClock } from '../../src/core/clock.js';
import { wrapFetch } from '../../src/proxy/wrap-fetch.js';
import { analyzePaths } from '../../src/report/analyze-paths.js';
import { createSimulator } from '../../src/sim/simulator.js';

const clock = new VirtualClock();
const sim = createSimulator({ clock, requireApiKey: false });
let simUrl: string;
beforeAll(async () => {
  simUrl = await sim.listen();
});
afterAll(() => sim.close());

const tool = (name: string) => ({
  name,
  description: `Tool ${name} does things. `.repeat(30),
  input_schema: { type: 'object' as const, properties: { x: { type: 'string' } } },
});

describe('the same messages under two system prompts', () => {
  it('are two conversations, each reading its own cache, with no miss but their first writes', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cacheward-two-prompts-'));
    const f = wrapFetch(globalThis.fetch, { dir, capture: 'hashes', clock, logger: { warn: () => {} } });
    const client = new Anthropic({ apiKey: 'k', baseURL: simUrl, maxRetries: 0, fetch: f });
    const reads: Record<string, number[]> = { a: [], b: [] };
    for (const tag of ['a', 'b']) {
      const system = [
        {
          type: 'text' as const,
          text: `Conversation ${tag}. ${'You are a careful agent. '.repeat(200)}`,
          cache_control: { type: 'ephemeral' as const },
        },
      ];
      const messages: Anthropic.MessageParam[] = [];
      for (let turn = 1; turn <= 6; turn++) {
        clock.advance(3_000);
        messages.push({ role: 'user', content: `Turn ${turn}: please continue the work. `.repeat(20) });
        const last = messages.length - 1;
        const res = await client.messages.create({
          model: 'claude-opus-5',
          max_tokens: 64,
          system,
          tools: [tool('read_file'), tool('write_file')],
          messages: messages.map((m, i) =>
            i === last
              ? {
                  ...m,
                  content: [{ type: 'text', text: String(m.content), cache_control: { type: 'ephemeral' } }],
                }
              : m,
          ),
        });
        reads[tag]?.push(res.usage.cache_read_input_tokens ?? 0);
        messages.push({ role: 'assistant', content: res.content as Anthropic.ContentBlockParam[] });
      }
    }
    await f.close();
    // Each conversation read its own prefix from its second turn on (the simulator says so).
    for (const tag of ['a', 'b']) expect(reads[tag]?.slice(1).every((r) => r > 0)).toBe(true);
    const report = await analyzePaths([dir], { prices: new PriceTable() });
    expect(report.byCause.map((c) => c.cause)).toEqual(['cold_start']);
    expect(report.totals.waste).toBe(0);
    const conversations = new Set(report.requests.map((r) => r.conversation));
    expect(conversations.size).toBe(2);
  });
});
