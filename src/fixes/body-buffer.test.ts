import { describe, expect, it } from 'vitest';
import { seededRandom } from '../demo/agent-conversation.js';
import { BodyAssembler, CLASSED_BYTES, concatBody, sizeClass } from './body-buffer.js';

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

describe('BodyAssembler', () => {
  const chunked = (total: number, seed: number): Buffer[] => {
    const rand = seededRandom(seed);
    const parts: Buffer[] = [];
    let left = total;
    while (left > 0) {
      const n = Math.min(left, 1 + Math.floor(rand() * 70_000));
      const p = Buffer.alloc(n);
      for (let i = 0; i < n; i += 997) p[i] = Math.floor(rand() * 256);
      parts.push(p);
      left -= n;
    }
    return parts;
  };
  const behind = (out: Buffer) =>
    Buffer.from(out.buffer, out.byteOffset, out.buffer.byteLength - out.byteOffset);

  it('is concatBody of the chunks byte for byte, declared or not, whatever the declared length says', () => {
    for (const [k, total] of [
      0,
      10,
      CLASSED_BYTES - 1,
      CLASSED_BYTES,
      300_001,
      2 * 1024 * 1024 + 17,
    ].entries()) {
      const parts = chunked(total, 10 + k);
      const expected = concatBody(parts);
      for (const declared of [
        undefined,
        Number.NaN,
        -1,
        total,
        total - 1,
        total + 1,
        total + 400_000,
        2 ** 40,
      ]) {
        const a = new BodyAssembler(declared);
        for (const p of parts) a.push(p);
        const out = a.finish();
        expect(out.equals(expected)).toBe(true);
        // The memory behind the body: its class, the body, then zeros (no earlier bytes left readable).
        if (total >= CLASSED_BYTES) {
          expect(out.byteOffset).toBe(0);
          expect(out.buffer.byteLength).toBe(sizeClass(total));
          expect(
            behind(out)
              .subarray(total)
              .every((b) => b === 0),
          ).toBe(true);
        }
      }
    }
  });

  it('copies each chunk into the body as it arrives when the length was declared', () => {
    const parts = chunked(1024 * 1024, 20);
    const a = new BodyAssembler(1024 * 1024);
    for (const p of parts) a.push(p);
    // The chunks are the caller's: changing them after they were pushed changes nothing.
    for (const p of parts) p.fill(0);
    const out = a.finish();
    expect(out.equals(Buffer.concat(parts))).toBe(false);
    expect(out.equals(concatBody(chunked(1024 * 1024, 20)))).toBe(true);
  });
});
