import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CaptureWriter } from '../capture/capture-writer.js';
import { ConversationTracker } from '../conversation/conversation-tracker.js';
import { VirtualClock } from '../core/clock.js';
import { runStepped } from '../core/stepped-work.js';
import { PrefixBuilder } from '../prefix/build-prefix.js';
import { type ExchangeFacts, ExchangeRecorder } from './exchange-recorder.js';
import { ProxyMetrics } from './proxy-metrics.js';
import { WorkSlices } from './work-slices.js';

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** `n` short messages: 60,000 make a 4.5 MB body, whose parse in one piece held the loop 2.5 to 5 s here. */
function hugeBody(n: number): Buffer {
  const messages = Array.from({ length: n }, (_, i) => ({
    role: i % 2 ? 'assistant' : 'user',
    content: [{ type: 'text', text: `[${i}] message ${i % 13}` }],
  }));
  return Buffer.from(JSON.stringify({ model: 'claude-opus-5', max_tokens: 8, messages }));
}

function* counted(n: number, ran: string[]): Generator<void, number> {
  for (let i = 0; i < n; i++) {
    ran.push(`piece ${i}`);
    yield;
  }
  return n;
}

describe('stepped work', () => {
  it('WorkSlices.stepped runs one piece per step, other steps between, and resolves with the result', async () => {
    let clock = 0;
    const slices = new WorkSlices(4, 1000, () => clock++);
    const ran: string[] = [];
    const result = slices.stepped(counted(3, ran));
    const other = slices.run(() => ran.push('other'));
    expect(await result).toBe(3);
    await other;
    expect(ran).toEqual(['piece 0', 'other', 'piece 1', 'piece 2']);
  });

  it('series runs a step that has more to do again before the next one', async () => {
    const slices = new WorkSlices();
    const ran: string[] = [];
    const pieces = counted(2, ran);
    await slices.series([() => pieces.next().done !== true, () => ran.push('record')]);
    expect(ran).toEqual(['piece 0', 'piece 1', 'record']);
  });

  it('runStepped gives the event loop back between pieces and passes errors on', async () => {
    let clock = 0;
    const ran: string[] = [];
    // Every reading of the fake clock advances it 1 ms: four pieces fit in the 4 ms budget, then a turn.
    const done = runStepped(counted(6, ran), 4, () => (clock += 1));
    expect(ran).toHaveLength(4);
    expect(await done).toBe(6);
    function* failing(): Generator<void, number> {
      yield;
      throw new Error('bad body');
    }
    await expect(runStepped(failing())).rejects.toThrow('bad body');
  });

  it("the after-response parse of a huge body never holds the loop for the whole body's parse", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cacheward-steps-'));
    dirs.push(dir);
    const clock = new VirtualClock();
    const writer = new CaptureWriter({ dir: join(dir, 'c'), mode: 'hashes', clock });
    const builder = new PrefixBuilder();
    const recorder = new ExchangeRecorder({
      writer,
      metrics: new ProxyMetrics(),
      builder,
      conversations: new ConversationTracker(),
    });
    const forwarded = hugeBody(60_000);
    const facts: ExchangeFacts = {
      id: 'huge',
      provider: 'anthropic',
      route: '/v1/messages',
      method: 'POST',
      requestHeaders: new Headers(),
      forwarded,
      fixes: [],
      start: 0,
      end: 1,
      outcome: 'complete',
    };
    const slices = new WorkSlices();
    await slices.stepped(recorder.parseSteps(facts));
    // The same prefix as a parse in one piece (parse-steps.test.ts compares every block).
    expect(facts.prefix?.blocks.length).toBe(60_000);
    expect(facts.parseError).toBeUndefined();
    // A generous bound for a busy machine (a piece is a few hundred units, about a millisecond quiet; a
    // collection or the OS can stretch one): the whole parse in one step was seconds.
    expect(slices.stats.slices).toBeGreaterThan(40);
    expect(slices.stats.longestStepMs).toBeLessThan(600);
    await writer.close();
  }, 60_000);
});
