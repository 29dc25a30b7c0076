import { getHeapStatistics } from 'node:v8';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { fullCollect, MemoryRelease, SLACK_HEAP_BYTES } from './memory-release.js';

const MB = 1024 * 1024;
/** Moves the fake clock and timers on, running what falls due (and the promises they settle). */
const wait = (ms: number) => vi.advanceTimersByTimeAsync(ms);

/** A release with a fake heap and a collector that notes each call, idle after 20 ms without an exchange. */
function release(heap: { committed: number; used: number }, busy = () => false, minGapMs = 0) {
  const ran: boolean[] = [];
  const memory = new MemoryRelease({
    quietMs: 10,
    idleMs: 20,
    minGapMs,
    busy,
    heap: () => heap,
    collect: (compact) => ran.push(compact),
  });
  return { memory, ran };
}

describe('MemoryRelease once idle', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('collects once the exchanges stop, when V8 holds much more heap than is live', async () => {
    const { memory, ran } = release({ committed: 240 * MB, used: 100 * MB });
    for (let i = 0; i < 5; i++) {
      memory.afterExchange();
      await wait(5);
    }
    expect(ran).toHaveLength(0);
    await wait(80);
    expect(ran).toEqual([true]);
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

describe('fullCollect', () => {
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
    fullCollect(false);
    const first = scattered();
    let before = committed();
    fullCollect(false);
    const plainGave = before - committed();
    const second = scattered();
    before = committed();
    fullCollect(true);
    const compactingGave = before - committed();
    expect(first.length + second.length).toBe(40_000);
    expect(compactingGave).toBeGreaterThan(32 * MB);
    expect(compactingGave).toBeGreaterThan(2 * plainGave);
  });
});

describe('MemoryRelease after a large body', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('compacts only when the heap is worth it, then runs a plain second collection', async () => {
    for (const [heap, expected] of [
      [{ committed: 240 * MB, used: 100 * MB }, [true, false]],
      [{ committed: 120 * MB, used: 100 * MB }, [false, false]],
    ] as const) {
      const ran: boolean[] = [];
      const memory = new MemoryRelease({ quietMs: 10, heap: () => heap, collect: (c) => ran.push(c) });
      memory.afterLargeBody(8 * MB - 1);
      await wait(40);
      expect(ran).toEqual([]);
      memory.afterLargeBody(8 * MB);
      await wait(40);
      expect(ran).toEqual(expected.slice(0, 1));
      await wait(2_100);
      expect(ran).toEqual(expected);
      memory.stop();
    }
  });

  it('runs nothing once stopped, even a collection already waiting on the capture queue', async () => {
    const ran: boolean[] = [];
    let release!: () => void;
    const settled = () => new Promise<void>((r) => (release = r));
    const memory = new MemoryRelease({ quietMs: 10, settled, collect: (c) => ran.push(c) });
    memory.afterLargeBody(8 * MB);
    await wait(20);
    memory.stop();
    release();
    await wait(3_000);
    memory.afterLargeBody(8 * MB);
    memory.afterExchange();
    await wait(60_000);
    expect(ran).toEqual([]);
  });

  it('keeps one collection chain for bodies that come while one is on its way', async () => {
    const ran: boolean[] = [];
    const memory = new MemoryRelease({ quietMs: 10, collect: (c) => ran.push(c) });
    memory.afterLargeBody(8 * MB);
    await wait(5);
    memory.afterLargeBody(8 * MB);
    await wait(2_100);
    expect(ran).toEqual([false, false]);
    // A later body, within the least gap: its collection waits for the gap.
    memory.afterLargeBody(8 * MB);
    await wait(5_000);
    expect(ran).toHaveLength(2);
    await wait(10_000);
    expect(ran).toHaveLength(4);
    memory.stop();
  });
});
