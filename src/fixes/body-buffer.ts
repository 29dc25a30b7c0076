// Body-sized buffers for the fix path (the body read whole, the spliced body it forwards), allocated in size
// classes so a conversation's next body, a little longer than its last, reuses freed memory. Pure; it never
// changes a byte: the result is exactly the concatenation, and the slack past its end is zeroed.

/** Below this a body is allocated as it is (small allocations are pooled or reused anyway). */
export const CLASSED_BYTES = 256 * 1024;

/**
 * The allocation size for a body of `n` bytes: `n` rounded up to one of eight steps per power of two (at
 * most 1/8 more). A growing conversation's bodies share a class for several requests, so the allocator hands
 * back the memory a freed one of the class held: a body that grows by a few KB on every request allocated
 * memory no body had used (and faulted in every page of it).
 */
export function sizeClass(n: number): number {
  if (n < CLASSED_BYTES) return n;
  const step = 2 ** Math.floor(Math.log2(n)) / 8;
  return Math.ceil(n / step) * step;
}

/** `Buffer.concat(parts)`, its memory in {@link sizeClass}es (a view of `length` bytes). */
export function concatBody(parts: readonly Uint8Array[], length?: number): Buffer {
  const total = length ?? parts.reduce((s, p) => s + p.length, 0);
  if (total < CLASSED_BYTES) return Buffer.concat(parts, total);
  const whole = Buffer.allocUnsafeSlow(sizeClass(total));
  // What the allocator handed over past the body may be any earlier bytes: never left readable.
  whole.fill(0, total);
  const out = whole.subarray(0, total);
  let at = 0;
  for (const p of parts) {
    if (at >= total) break;
    const n = Math.min(p.length, total - at);
    out.set(n === p.length ? p : p.subarray(0, n), at);
    at += n;
  }
  if (at < total) out.fill(0, at);
  return out;
}
