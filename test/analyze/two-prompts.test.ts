// One task set under two system prompts (an eval's A/B), no session label: the same user messages, the same
// tools, another system prompt. Two conversations, each reading its own cache, whether the two run one after
// the other or turn by turn: no invented miss or waste. And a first request retried on another model, whose
// retry the user carried on, stays that one line when the model comes back.

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

/** A client on wrapFetch into the simulator, each line its own history; `close` gives the report. */
function agents() {
  const dir = mkdtempSync(join(tmpdir(), 'cacheward-two-prompts-'));
  const f = wrapFetch(globalThis.fetch, { dir, capture: 'hashes', clock, logger: { warn: () => {} } });
  const client = new Anthropic({ apiKey: 'k', baseURL: simUrl, maxRetries: 0, fetch: f });
  const histories = new Map<string, Anthropic.MessageParam[]>();
  return {
    /** One turn of line `line` under system prompt `prompt` on `model`; what it read from the cache. */
    async turn(line: string, prompt: string, text: string, model = 'claude-opus-5'): Promise<number> {
      clock.advance(3_000);
      const messages = histories.get(line) ?? [];
      histories.set(line, messages);
      messages.push({ role: 'user', content: text.repeat(20) });
      const last = messages.length - 1;
      const res = await client.messages.create({
        model,
        max_tokens: 64,
        system: [
          {
            type: 'text',
            text: `Conversation ${prompt}. ${'You are a careful agent. '.repeat(200)}`,
            cache_control: { type: 'ephemeral' },
          },
        ],
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
      messages.push({ role: 'assistant', content: res.content as Anthropic.ContentBlockParam[] });
      return res.usage.cache_read_input_tokens ?? 0;
    },
    async close() {
      await f.close();
      return analyzePaths([dir], { prices: new PriceTable() });
    },
  };
}

describe('the same messages under two system prompts', () => {
  it.each(['one after the other', 'turn by turn'] as const)(
    'are two conversations, each reading its own cache, with no miss but their first writes (%s)',
    async (order) => {
      const a = agents();
      const reads: Record<string, number[]> = { a: [], b: [] };
      const turns = [1, 2, 3, 4, 5, 6];
      const plan =
        order === 'one after the other'
          ? ['a', 'b'].flatMap((tag) => turns.map((t) => [tag, t] as const))
          : turns.flatMap((t) => ['a', 'b'].map((tag) => [tag, t] as const));
      // The prompt names the run too: each test's caches are its own in the one simulator.
      for (const [tag, t] of plan)
        reads[tag]?.push(await a.turn(tag, `${tag} (${order})`, `Turn ${t}: please continue the work. `));
      const report = await a.close();
      // Each conversation read its own prefix from its second turn on (the simulator says so).
      for (const tag of ['a', 'b']) expect(reads[tag]?.slice(1).every((r) => r > 0)).toBe(true);
      expect(report.byCause.map((c) => c.cause)).toEqual(['cold_start']);
      expect(report.totals.waste).toBe(0);
      const lines = new Map<string, number>();
      for (const r of report.requests) lines.set(r.conversation, (lines.get(r.conversation) ?? 0) + 1);
      expect([...lines.values()]).toEqual([6, 6]);
    },
  );

  it('a first request retried on another model and carried on is the line when the model comes back', async () => {
    const a = agents();
    await a.turn('first', 'a', 'Turn 1: go. ');
    // The same first message again, on another model: the user goes on with this one.
    for (const t of [1, 2, 3]) await a.turn('retry', 'a', `Turn ${t}: go. `, 'claude-haiku-4-5');
    for (const t of [4, 5]) await a.turn('retry', 'a', `Turn ${t}: go. `);
    const report = await a.close();
    const [, q2, , q4, q5, q6] = report.requests;
    // Back on the first model, it continues the retried line (turn 4 of it), not the first request.
    expect(q5).toMatchObject({ relation: 'continues', parent: q4?.id, conversation: q2?.conversation });
    expect(q6).toMatchObject({ relation: 'continues', parent: q5?.id });
  });
});
