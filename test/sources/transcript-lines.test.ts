// TranscriptLines: bytes as a file's writer appends them, cut into the lines the report's reader (readline)
// gives, numbered the same, however the bytes are split; a half line held until it ends or the file settles.

import { createInterface } from 'node:readline';
import { Readable } from 'node:stream';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { SourceRequest, TranscriptAdapter } from '../../src/sources/source-request.js';
import { TranscriptLines } from '../../src/sources/transcript-lines.js';

/** An adapter that only notes the lines it is given and how it was settled. */
class NotingAdapter implements TranscriptAdapter {
  readonly ready: SourceRequest[] = [];
  readonly lines: Array<[number, string]> = [];
  readonly settled: boolean[] = [];
  line(text: string, n: number): void {
    this.lines.push([n, text]);
  }
  settle(all: boolean): void {
    this.settled.push(all);
  }
  waitingSince(): number | undefined {
    return undefined;
  }
  end(): void {}
}

/** What readline (the report's reader) makes of the same bytes, blank lines dropped as the adapters do. */
async function readlineLines(bytes: Buffer): Promise<Array<[number, string]>> {
  const out: Array<[number, string]> = [];
  let n = 0;
  for await (const text of createInterface({
    input: Readable.from([bytes]),
    crlfDelay: Number.POSITIVE_INFINITY,
  }))
    out.push([++n, text]);
  return out;
}

describe('TranscriptLines', () => {
  it('gives the lines readline gives, numbered alike, however the bytes are cut', async () => {
    const line = fc.stringMatching(/^[a-z{}":,é漢😀 ]{0,40}$/u);
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.tuple(line, fc.boolean()), { minLength: 1, maxLength: 20 }),
        fc.array(fc.nat(), { maxLength: 12 }),
        async (rows, cuts) => {
          const bytes = Buffer.from(rows.map(([t, crlf]) => `${t}${crlf ? '\r\n' : '\n'}`).join(''));
          const adapter = new NotingAdapter();
          const lines = new TranscriptLines(adapter, () => {});
          const at = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b);
          let from = 0;
          for (const c of [...at, bytes.length]) {
            lines.push(bytes.subarray(from, c));
            from = c;
          }
          expect(lines.partial).toBe(false);
          expect(adapter.lines).toEqual(await readlineLines(bytes));
        },
      ),
      { numRuns: 200 },
    );
  });

  it('holds a half line until its newline comes, and reads it as it is only when told the file settled for long', () => {
    const adapter = new NotingAdapter();
    const lines = new TranscriptLines(adapter, () => {});
    lines.push(Buffer.from('{"a":1}\n{"b":'));
    expect(adapter.lines).toEqual([[1, '{"a":1}']]);
    expect(lines.partial).toBe(true);
    lines.settle(false);
    expect(adapter.lines).toHaveLength(1);
    expect(adapter.settled).toEqual([false]);
    lines.push(Buffer.from('2}\n{"c":'));
    expect(adapter.lines).toEqual([
      [1, '{"a":1}'],
      [2, '{"b":2}'],
    ]);
    lines.settle(true);
    expect(adapter.lines[2]).toEqual([3, '{"c":']);
    expect(lines.partial).toBe(false);
    expect(adapter.settled).toEqual([false, true]);
  });

  it('passes over a line longer than its bound with one warning, and numbers the next one right', () => {
    const adapter = new NotingAdapter();
    const warnings: Array<[number, string]> = [];
    const lines = new TranscriptLines(adapter, (n, m) => warnings.push([n, m]), 16);
    lines.push(Buffer.from('{"a":1}\n0123456789'));
    lines.push(Buffer.from('0123456789'));
    lines.push(Buffer.from('more\n{"b":2}\n'));
    expect(adapter.lines).toEqual([
      [1, '{"a":1}'],
      [3, '{"b":2}'],
    ]);
    expect(warnings).toEqual([[2, 'skipped a line longer than 16 bytes (not held while it is written)']]);
  });
});
