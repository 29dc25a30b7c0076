// Body-sized buffers for the fix path (the body read whole, the spliced body it forwards), allocated in size
// classes so a conversation's next body, a little longer than its last, reuses freed memory. Pure; it never
// changes a byte: the result is exactly the concatenation, and the slack past its end is zeroed.

/** Below this a body is allocated as it is (small allocations are pooled or reused anyway). */
export const CLASSED_BYTES = 256 * 1024;

/**
 * The allocation size for a body of `n` bytes: `n` rounded up to one of eight steps per power of two (at
 * most 1/8 more). A growing conversation's bodies share a class for several requests, so the allocator hands
 * back the memory a freed one of the class held: a body that grows by a few KB on every request allocated
 * memory no body had used (and faulted in every page of it, about 1 ms per 2 MB on a busy machine).
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

/**
 * The longest declared body read into memory of its size as it arrives (32 MB: Anthropic's request limit);
 * a longer one, or one whose length is not declared (chunked), is kept as its chunks and joined at the end.
 */
export const MAX_DECLARED_BYTES = 32 * 1024 * 1024;

/**
 * A request body read whole, copied into its {@link sizeClass} buffer chunk by chunk as it arrives when its
 * length was declared: the copy is made while the next chunk is on its way, not all at once after the last
 * (about 0.6 ms per MB on the request path through the proxy). `finish()` is `concatBody` of the chunks,
 * byte for byte, whatever the chunks (fewer bytes than declared, or more), and leaves no earlier bytes in
 * the memory behind it.
 */
export class BodyAssembler {
  private whole: Buffer | undefined;
  private chunks: Uint8Array[] = [];
  private length = 0;

  /** `declared`: the content-length the request gave (anything else: undefined, NaN, negative). */
  constructor(declared?: number) {
    if (
      declared !== undefined &&
      Number.isSafeInteger(declared) &&
      declared >= CLASSED_BYTES &&
      declared <= MAX_DECLARED_BYTES
    )
      this.whole = Buffer.allocUnsafeSlow(sizeClass(declared));
  }

  push(chunk: Uint8Array): void {
    const whole = this.whole;
    if (whole && this.length + chunk.length <= whole.length) whole.set(chunk, this.length);
    else {
      if (whole) {
        // More than declared: what was copied goes back to being one chunk among the others.
        this.chunks.push(whole.subarray(0, this.length));
        this.whole = undefined;
      }
      this.chunks.push(chunk);
    }
    this.length += chunk.length;
  }

  /** The body: the bytes pushed, in order. */
  finish(): Buffer {
    const whole = this.whole;
    if (!whole) return concatBody(this.chunks, this.length);
    this.whole = undefined;
    // Fewer bytes than declared, and a smaller class would do: the same buffer concatBody would give.
    if (sizeClass(this.length) !== whole.length) return concatBody([whole.subarray(0, this.length)]);
    whole.fill(0, this.length);
    return whole.subarray(0, this.length);
  }
}
