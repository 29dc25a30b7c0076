import { describe, expect, it } from 'vitest';
import { mapBounded } from './map-bounded.js';

describe('mapBounded', () => {
  it('keeps the order of the list and never has more than the limit under way', async () => {
    let now = 0;
    let most = 0;
    const out = await mapBounded([5, 1, 4, 2, 3, 0, 6], 3, async (n) => {
      most = Math.max(most, ++now);
      await new Promise((r) => setTimeout(r, n));
      now--;
      return n * 10;
    });
    expect(out).toEqual([50, 10, 40, 20, 30, 0, 60]);
    expect(most).toBe(3);
  });

  it('takes an empty list, and passes a failure on', async () => {
    expect(await mapBounded([], 4, async () => 1)).toEqual([]);
    await expect(
      mapBounded([1, 2], 2, async (n) => {
        if (n === 2) throw new Error('two');
        return n;
      }),
    ).rejects.toThrow('two');
  });
});
