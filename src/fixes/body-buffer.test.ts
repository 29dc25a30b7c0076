// Body buffers: size classes round up by at most an eighth, and the result is Buffer.concat byte for byte.
// Pure: no I/O.

import { describe, expect, it } from 'vitest';
import { seededRandom } from '../sim/agent-conversation.js';
import { CLASSED_BYTES, concatBody, sizeClass } from './body-buffer.js';

describe('sizeClass', () => {
  it('rounds up by at most an eighth, and a growing body keeps its class for a while', () => {
    const rand = seededRandom(3);
    for (let k = 0; k < 2_000; k++) {
      const n = Math.floor(rand() * 64 * 1024 * 1024);
      const c = sizeClass(n);
      expect(c).toBeGreaterThanOrEqual(n);
      expect(c).toBeLessThanOrEqual(n < CLASSED_BYTES ? n : Math.ceil(n * 1.125));
      expect(sizeClass(c)).toBe(c);
    }
    // 2 MB growing by 5 KB a request: the same class for 50 requests.
    const classes = new Set(Array.from({ length: 50 }, (_, i) => sizeClass(2 * 1024 * 1024 + 1 + i * 5_000)));
    expect(classes.size).toBe(1);
  });
});

describe('concatBody', () => {
  it('is Buffer.concat byte for byte, small or large, and its slack holds no earlier bytes', () => {
    const rand = seededRandom(4);
    for (const total of [0, 10, CLASSED_BYTES - 1, CLASSED_BYTES, 300_001, 2 * 1024 * 1024 + 17]) {
      const parts: Buffer[] = [];
      let left = total;
      while (left > 0) {
        const n = Math.min(left, 1 + Math.floor(rand() * 100_000));
        parts.push(Buffer.alloc(n, Math.floor(rand() * 256)));
        left -= n;
      }
      const out = concatBody(parts);
      expect(out.equals(Buffer.concat(parts))).toBe(true);
      expect(out.length).toBe(total);
      // The memory behind the view: the body, then zeros.
      const whole = Buffer.from(out.buffer, out.byteOffset, sizeClass(total));
      if (total >= CLASSED_BYTES) expect(whole.subarray(total).every((b) => b === 0)).toBe(true);
      // A given length cuts or pads as Buffer.concat does.
      expect(
        concatBody(parts, Math.floor(total / 2)).equals(Buffer.concat(parts, Math.floor(total / 2))),
      ).toBe(true);
      expect(concatBody(parts, total + 5).equals(Buffer.concat(parts, total + 5))).toBe(true);
    }
  });
});
