import { getHeapStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { compactingCollect, MemoryRelease, SLACK_HEAP_BYTES } from './memory-release.js';

const MB = 1024 * 1024;
const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A release with a fake heap and a counting collector, checking for a burst's end every 2 × 10 ms. */
function release(heap: { committed: number; used: number }, busy = () => false, minGapMs = 0) {
  const ran: number[] = [];
  const memory = new MemoryRelease({
    quietMs: 10,
    minGapMs,
    busy,
    heap: () => heap,
    collect: () => ran.push(1),
  });
  return { memory, ran };
}

describe('MemoryRelease after a burst', () => {
  it('collects once the exchanges stop, when V8 holds much more heap than is live', async () => {
    const { memory, ran } = release({ committed: 240 * MB, used: 100 * MB });
    for (let i = 0; i < 5; i++) {
      memory.afterExchange();
      await wait(5);
    }
    expect(ran).toHaveLength(0);
    await wait(80);
    expect(ran).toHaveLength(1);
    // Quiet with no new exchange: nothing more to give back, no second collection.
    await wait(60);
    expect(ran).toHaveLength(1);
    memory.stop();
  });

  it('leaves a heap alone whose slack is small, in bytes or against what is live', async () => {
    for (const heap of [
      { committed: 100 * MB + SLACK_HEAP_BYTES - 1, used: 100 * MB },
      { committed: 400 * MB, used: 300 * MB },
    ]) {
      const { memory, ran } = release(heap);
      memory.afterExchange();
      await wait(80);
      expect(ran).toHaveLength(0);
      memory.stop();
    }
  });

  it('waits while an exchange is open, and keeps the least gap between collections', async () => {
    let open = true;
    const { memory, ran } = release({ committed: 240 * MB, used: 100 * MB }, () => open, 10_000);
    memory.afterExchange();
    await wait(80);
    expect(ran).toHaveLength(0);
    open = false;
    await wait(60);
    expect(ran).toHaveLength(1);
    // A second burst within the gap is not collected again.
    memory.afterExchange();
    await wait(80);
    expect(ran).toHaveLength(1);
    memory.stop();
  });
});

describe('compactingCollect', () => {
  /** A million small objects, every 50th kept: dead objects scattered over every page they filled. */
  function scattered(): Array<{ i: number; s: string }> {
    let all: Array<{ i: number; s: string }> = [];
    for (let i = 0; i < 1_000_000; i++) all.push({ i, s: `x${i}` });
    const kept = all.filter((_, i) => i % 50 === 0);
    all = [];
    return kept;
  }
  const committed = () => getHeapStatistics().total_heap_size;

  it('gives back the pages that dead objects were scattered over, which a plain full collection keeps', () => {
    setFlagsFromString('--expose-gc');
    const plain = runInNewContext('gc') as () => void;
    plain();
    const first = scattered();
    let before = committed();
    plain();
    const plainGave = before - committed();
    const second = scattered();
    before = committed();
    compactingCollect();
    const compactingGave = before - committed();
    expect(first.length + second.length).toBe(40_000);
    expect(compactingGave).toBeGreaterThan(32 * MB);
    expect(compactingGave).toBeGreaterThan(2 * plainGave);
  });
});
