import { describe, expect, it } from 'vitest';
import { WorkSlices } from './work-slices.js';

const turn = () => new Promise((r) => setImmediate(r));

describe('WorkSlices', () => {
  it('runs steps in slices of about the budget, yielding to the event loop between them', async () => {
    let clock = 0;
    const slices = new WorkSlices(4, 1000, () => clock);
    const ran: number[] = [];
    const done = Array.from({ length: 10 }, (_, i) =>
      slices.run(() => {
        clock += 1.5; // each step costs 1.5 ms: three fit in a 4 ms budget (the third starts at 3 ms)
        ran.push(i);
        return i * 2;
      }),
    );
    await turn();
    expect(ran).toEqual([0, 1, 2]);
    expect(slices.pending).toBe(7);
    expect(await Promise.all(done)).toEqual([0, 2, 4, 6, 8, 10, 12, 14, 16, 18]);
    expect(slices.stats.slices).toBe(4);
    expect(slices.stats.longestMs).toBe(4.5);
    expect(slices.stats.longestStepMs).toBe(1.5);
  });

  it('tells the CPU time its longest slice used, so a slice the process spent preempted shows as such', async () => {
    let clock = 0;
    let cpu = 0;
    const slices = new WorkSlices(
      4,
      1000,
      () => clock,
      () => cpu,
    );
    const first = slices.run(() => {
      clock += 2;
      cpu += 2; // worked the whole time
    });
    await first;
    await slices.run(() => {
      clock += 30; // descheduled for most of it: 30 ms on the clock, 1 ms of CPU
      cpu += 1;
    });
    expect(slices.stats.longestMs).toBe(30);
    expect(slices.stats.longestCpuMs).toBe(1);
    expect(slices.metricsText()).toContain('cacheward_after_response_slice_max_cpu_seconds 0.001000');
  });

  it('counts slices by length in a cumulative histogram, so a stretch of traffic can be told from the start', async () => {
    let clock = 0;
    const slices = new WorkSlices(4, 1000, () => clock);
    for (const ms of [0.5, 3, 30, 5]) {
      await slices.run(() => {
        clock += ms;
      });
    }
    const text = slices.metricsText();
    expect(text).toContain('cacheward_after_response_slice_seconds_bucket{le="0.001"} 1');
    expect(text).toContain('cacheward_after_response_slice_seconds_bucket{le="0.002"} 1');
    // 5 ms is within the 5 ms bucket (le: at most).
    expect(text).toContain('cacheward_after_response_slice_seconds_bucket{le="0.005"} 3');
    expect(text).toContain('cacheward_after_response_slice_seconds_bucket{le="0.02"} 3');
    expect(text).toContain('cacheward_after_response_slice_seconds_bucket{le="0.05"} 4');
    expect(text).toContain('cacheward_after_response_slice_seconds_bucket{le="+Inf"} 4');
    expect(text).toContain('cacheward_after_response_slice_seconds_count 4');
    expect(text).toContain('cacheward_after_response_slice_seconds_sum 0.038500');
  });

  it("keeps one step's failure to its own promise", async () => {
    const slices = new WorkSlices();
    const bad = slices.run(() => {
      throw new Error('boom');
    });
    const good = slices.run(() => 'fine');
    await expect(bad).rejects.toThrow('boom');
    await expect(good).resolves.toBe('fine');
  });

  it('drains past the budget when the backlog is over its bound', async () => {
    let clock = 0;
    const slices = new WorkSlices(4, 5, () => clock);
    let ran = 0;
    const done = Array.from({ length: 12 }, () =>
      slices.run(() => {
        clock += 2;
        ran++;
      }),
    );
    await turn();
    // Twelve waiting, bound five: the first slice runs until five are left, past its 4 ms.
    expect(ran).toBe(7);
    await Promise.all(done);
    expect(slices.metricsText()).toContain('cacheward_after_response_slice_max_seconds 0.014000');
  });
});

describe('WorkSlices.series', () => {
  it('runs a series in order, sharing a slice, and stops it at the first failure', async () => {
    const slices = new WorkSlices();
    const seen: string[] = [];
    await slices.series([() => seen.push('a'), () => seen.push('b')]);
    expect(seen).toEqual(['a', 'b']);
    const failing = slices.series([
      () => {
        throw new Error('parse failed');
      },
      () => seen.push('never'),
    ]);
    await expect(failing).rejects.toThrow('parse failed');
    expect(seen).toEqual(['a', 'b']);
  });
});
