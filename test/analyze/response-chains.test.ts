// previous_response_id chains outside the simulator: through the official `openai` SDK against `cacheward sim`
// behind `cacheward proxy`, a chained session is one conversation whose every turn continues the one before,
// the capture holds the whole chained prefix (hashes only), and the report prices and diagnoses it.
//
// SPEC-caching.md ("Conversation state"): the chained response's context "comes before the new input, is part
// of the input, and caches like the same conversation resent in full".

import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { PriceTable } from '../../src/analyze/price-table.js';
import { analyzePaths } from '../../src/report/analyze-paths.js';
import { startProxy } from '../proxy/helpers.js';
import { filler } from '../sim/helpers.js';

type Json = Record<string, unknown>;

async function send(client: OpenAI, body: Json, stream: boolean): Promise<Json> {
  if (!stream) return (await client.responses.create(body as never)) as unknown as Json;
  return (await client.responses.stream(body as never).finalResponse()) as unknown as Json;
}

const usage = (r: Json) => r.usage as { input_tokens: number; input_tokens_details: Json };
const SECRET = 'the-user-wrote-this-secret-sentence';

/** Five chained turns (alternately streamed), the instructions changed at `changeAt` (1-based) if given. */
async function chainedSession(client: OpenAI, changeAt?: number) {
  const responses: Json[] = [];
  let previous: string | undefined;
  for (let turn = 1; turn <= 5; turn++) {
    const instructions =
      changeAt !== undefined && turn >= changeAt ? `${filler(600, 1)} (revised)` : filler(600, 1);
    const body: Json = {
      model: 'gpt-5.6',
      instructions,
      input: [{ role: 'user', content: `${SECRET} ${turn}: ${filler(400, 20 + turn)}` }],
      ...(previous ? { previous_response_id: previous } : {}),
    };
    const r = await send(client, body, turn % 2 === 0);
    responses.push(r);
    previous = r.id as string;
  }
  return responses;
}

describe('previous_response_id chains through the proxy: conversation, capture and report', () => {
  it('a 5-turn chained session is one conversation, every turn continues, no miss but the first write', async () => {
    const h = await startProxy({ capture: 'hashes' });
    const responses = await chainedSession(h.openai());
    const records = (await h.records()).map((r) => r.record);
    expect(records).toHaveLength(5);
    // The proxy's conversation model: one conversation, each turn continuing the previous one.
    expect(records.map((r) => r.conversation?.relation)).toEqual(['new', ...Array(4).fill('continues')]);
    expect(new Set(records.map((r) => r.conversation?.id)).size).toBe(1);
    expect(records.slice(1).map((r) => r.conversation?.parent)).toEqual(records.slice(0, 4).map((r) => r.id));
    expect(records.slice(1).map((r) => r.chain)).toEqual(
      responses.slice(0, 4).map((r) => ({ previous: r.id, context: 'known' })),
    );
    // The captured prefix is the whole chain: its size is what the simulator billed as input.
    for (const [i, r] of records.entries())
      expect(r.prefix?.totalTokens).toBe(usage(responses[i] as Json).input_tokens);
    // `hashes` mode: no prompt or output text anywhere on disk.
    for (const f of readdirSync(h.dir, { recursive: true }) as string[]) {
      if (!f.endsWith('.jsonl')) continue;
      const text = readFileSync(join(h.dir, f), 'utf8');
      expect(text).not.toContain(SECRET);
      expect(text).not.toContain('alpha bravo');
    }

    const result = await analyzePaths([h.dir], { prices: new PriceTable() });
    expect(result.requests.map((r) => r.relation)).toEqual(['new', ...Array(4).fill('continues')]);
    expect(new Set(result.requests.map((r) => r.conversation)).size).toBe(1);
    // The report's read and write tokens are the simulator's, and the cache model over the captured
    // prefixes expected exactly what the simulator read.
    const simRead = responses.reduce(
      (n, r) => n + (usage(r).input_tokens_details.cached_tokens as number),
      0,
    );
    const simWrite = responses.reduce(
      (n, r) => n + (usage(r).input_tokens_details.cache_write_tokens as number),
      0,
    );
    expect(simRead).toBeGreaterThan(0);
    expect(result.totals.readTokens).toBe(simRead);
    expect(result.totals.writtenTokens).toBe(simWrite);
    expect(result.requests.map((r) => r.expectedRead)).toEqual(
      responses.map((r) => usage(r).input_tokens_details.cached_tokens),
    );
    expect(result.misses.map((m) => m.cause)).toEqual(['cold_start']);
    expect(result.byCause.find((c) => c.cause === 'params_changed')).toBeUndefined();
  });

  it('a chain whose instructions change names system_changed at that turn, and still continues', async () => {
    const h = await startProxy({ capture: 'hashes' });
    const responses = await chainedSession(h.openai(), 3);
    expect(usage(responses[2] as Json).input_tokens_details.cached_tokens).toBe(0);
    const result = await analyzePaths([h.dir], { prices: new PriceTable() });
    expect(result.requests.map((r) => r.relation)).toEqual(['new', ...Array(4).fill('continues')]);
    const misses = result.misses.filter((m) => m.cause !== 'cold_start');
    expect(misses.map((m) => [m.turn, m.cause])).toEqual([[3, 'system_changed']]);
    expect(misses[0]?.parentId).toBe(result.requests[1]?.id);
    expect(misses[0]?.rewrittenTokens).toBe(usage(responses[1] as Json).input_tokens);
  });

  it('a chain on a response the proxy never saw: one opaque block sized from usage, still priced right', async () => {
    const h = await startProxy({ capture: 'hashes' });
    const instructions = filler(600, 1);
    const user = (n: number) => [{ role: 'user', content: `${SECRET} ${n}: ${filler(400, 40 + n)}` }];
    // The first turn goes straight to the simulator (another proxy, or before a restart).
    const first = await send(h.openai(true), { model: 'gpt-5.6', instructions, input: user(1) }, false);
    const responses: Json[] = [];
    let previous = first.id as string;
    for (let turn = 2; turn <= 4; turn++) {
      const r = await send(
        h.openai(),
        { model: 'gpt-5.6', instructions, previous_response_id: previous, input: user(turn) },
        turn === 3,
      );
      responses.push(r);
      previous = r.id as string;
    }
    const records = (await h.records()).map((r) => r.record);
    expect(records.map((r) => r.chain?.context)).toEqual(['unknown', 'unknown', 'unknown']);
    for (const [i, r] of records.entries())
      expect(r.prefix?.totalTokens).toBe(usage(responses[i] as Json).input_tokens);
    expect(records.map((r) => r.conversation?.relation)).toEqual(['new', 'continues', 'continues']);
    const result = await analyzePaths([h.dir], { prices: new PriceTable() });
    expect(result.requests.map((r) => r.relation)).toEqual(['new', 'continues', 'continues']);
    expect(result.requests.slice(1).map((r) => r.expectedRead)).toEqual(
      responses.slice(1).map((r) => usage(r).input_tokens_details.cached_tokens),
    );
    expect(result.misses.filter((m) => m.cause !== 'cold_start')).toEqual([]);
  });

  it('with fixes on (the request is read whole first), a chain still resolves as one conversation', async () => {
    const h = await startProxy({ capture: 'hashes', fixes: ['tools-sort'] });
    await chainedSession(h.openai());
    const records = (await h.records()).map((r) => r.record);
    expect(records.map((r) => r.conversation?.relation)).toEqual(['new', ...Array(4).fill('continues')]);
  });
});
