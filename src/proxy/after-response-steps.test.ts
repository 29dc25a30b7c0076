// After-response work on a huge body in bounded steps: every step of the record and of the live analysis
// does a bounded number of items (counted, not timed), and what comes out equals the one-step version.

import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { PriceTable } from '../analyze/price-table.js';
import { EntryStore } from '../cache/entry-store.js';
import { CaptureWriter } from '../capture/capture-writer.js';
import { MemoryConversationStore } from '../conversation/conversation-store.js';
import { ConversationTracker } from '../conversation/conversation-tracker.js';
import { VirtualClock } from '../core/clock.js';
import { STEP_ITEMS } from '../core/steps.js';
import { PrefixBuilder } from '../prefix/build-prefix.js';
import { TranscriptChain } from '../prefix/transcript.js';
import { MemoryProxyState } from '../state/memory-proxy-state.js';
import { afterResponse } from './after-response.js';
import { type ExchangeFacts, ExchangeRecorder } from './exchange-recorder.js';
import { LiveAnalysis } from './live-analysis.js';
import { ProxyMetrics } from './proxy-metrics.js';
import { WorkSlices } from './work-slices.js';

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
afterEach(() => {
  vi.restoreAllMocks();
});

/** `n` messages of one labelled conversation. */
function body(n: number): Buffer {
  const messages = Array.from({ length: n }, (_, i) => ({
    role: i % 2 ? 'assistant' : 'user',
    content: [{ type: 'text', text: `[${i}] message ${i % 13}` }],
  }));
  return Buffer.from(JSON.stringify({ model: 'claude-opus-5', max_tokens: 8, system: 'Agent.', messages }));
}

function facts(id: string, forwarded: Buffer, start: number): ExchangeFacts {
  return {
    id,
    provider: 'anthropic',
    route: '/v1/messages',
    method: 'POST',
    requestHeaders: new Headers({ 'x-cacheward-session': 'huge' }),
    forwarded,
    fixes: [],
    start,
    end: start + 5,
    status: 200,
    outcome: 'complete',
    response: {
      bytes: 10,
      stream: false,
      json: {
        id: `msg_${id}`,
        type: 'message',
        role: 'assistant',
        model: 'claude-opus-5',
        content: [{ type: 'text', text: 'done' }],
        usage: { input_tokens: 10, output_tokens: 1, cache_read_input_tokens: 0 },
      },
    },
  } as ExchangeFacts;
}

function dir(): string {
  const d = mkdtempSync(join(tmpdir(), 'cacheward-after-'));
  dirs.push(d);
  return d;
}

describe('after-response work on a huge body', () => {
  it('runs in steps of a bounded number of items, and records and analyzes what one step would', async () => {
    // What is counted: the conversation index's lookups and writes, the transcript states of the prefix
    // blocks the live analysis builds (one per block) and its cache model's lookups (a miss explained).
    let items = 0;
    for (const m of ['addPassing', 'passingThrough', 'endingAt'] as const) {
      const original = MemoryConversationStore.prototype[m] as (...a: unknown[]) => unknown;
      vi.spyOn(MemoryConversationStore.prototype, m).mockImplementation(function (
        this: MemoryConversationStore,
        ...a: unknown[]
      ) {
        items++;
        return original.apply(this, a);
      } as never);
    }
    for (const m of ['peek', 'lookup'] as const) {
      const original = EntryStore.prototype[m] as (...a: unknown[]) => unknown;
      vi.spyOn(EntryStore.prototype, m).mockImplementation(function (this: EntryStore, ...a: unknown[]) {
        items++;
        return original.apply(this, a);
      } as never);
    }
    const save = TranscriptChain.prototype.save;
    vi.spyOn(TranscriptChain.prototype, 'save').mockImplementation(function (this: TranscriptChain) {
      items++;
      return save.call(this);
    });
    // The slices read their clock once per step: that is where the items of each step are counted.
    let most = 0;
    let steps = 0;
    const perStep = () => {
      most = Math.max(most, items);
      items = 0;
      steps++;
      return 0;
    };
    const run = async (stepped: boolean) => {
      const state = new MemoryProxyState();
      const d = dir();
      const writer = new CaptureWriter({ dir: d, mode: 'hashes', clock: new VirtualClock() });
      const recorder = new ExchangeRecorder({
        writer,
        metrics: new ProxyMetrics(),
        builder: new PrefixBuilder(),
        conversations: stepped ? state.local : new ConversationTracker(state.local.store),
      });
      const live = new LiveAnalysis({ prices: new PriceTable() });
      const rows: unknown[] = [];
      live.subscribe((row) => rows.push(row));
      const turns = [facts('t1', body(30_001), 1_000), facts('t2', body(30_003), 2_000)];
      if (stepped) {
        const slices = new WorkSlices(4, 192, perStep);
        // Both at once, as two exchanges that ended together: their steps interleave.
        await Promise.all(
          turns.map((f) => afterResponse({ recorder, state, live, log: () => {}, slices }, f, undefined)),
        );
      } else
        for (const f of turns) {
          recorder.parse(f);
          live.add(recorder.record(f));
        }
      await writer.close();
      const file = readdirSync(d)[0] as string;
      return { rows, lines: readFileSync(join(d, file), 'utf8'), sizes: state.local.store.sizes() };
    };
    const whole = await run(false);
    items = 0;
    const stepped = await run(true);
    // 30,000 message ends indexed and 30,000 blocks analyzed per turn, in one step each before.
    expect(most).toBeLessThanOrEqual(2 * STEP_ITEMS);
    expect(steps).toBeGreaterThan((4 * 30_000) / STEP_ITEMS);
    expect(stepped.rows).toEqual(whole.rows);
    expect(stepped.rows).toHaveLength(2);
    expect(stepped.lines).toBe(whole.lines);
    expect(stepped.sizes).toEqual(whole.sizes);
  }, 120_000);
});
