// The file's lines are readline's (crlfDelay: Infinity) whatever the chunk size: CRLF one break, a lone CR a
// break, the last line without a newline given, a character split across two chunks decoded whole.
import { createReadStream, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { describe, expect, it } from 'vitest';
import { fileLines } from './file-lines.js';

async function readlineLines(file: string): Promise<string[]> {
  const out: string[] = [];
  for await (const l of createInterface({
    input: createReadStream(file),
    crlfDelay: Number.POSITIVE_INFINITY,
  }))
    out.push(l);
  return out;
}

async function ours(file: string, chunk: number): Promise<{ lines: string[]; ends: number[] }> {
  const lines: string[] = [];
  const ends: number[] = [];
  for await (const b of fileLines(file, chunk)) {
    lines.push(...b.lines);
    ends.push(...b.ends);
  }
  return { lines, ends };
}

describe('fileLines', () => {
  const dir = mkdtempSync(join(tmpdir(), 'cacheward-file-lines-'));
  const text = '{"a":1}\n{"b":"é€😀"}\r\n\nlone\rcarriage\r\r\n  \nlast without newline';
  const file = join(dir, 'lines.jsonl');
  writeFileSync(file, text);

  it('cuts the lines readline cuts, at every chunk size', async () => {
    const expected = await readlineLines(file);
    for (const chunk of [1, 2, 3, 5, 7, 64, 1024 * 1024])
      expect((await ours(file, chunk)).lines).toEqual(expected);
  });

  it('gives each line the file offset past its newline', async () => {
    const { lines, ends } = await ours(file, 4);
    expect(lines[0]).toBe('{"a":1}');
    expect(ends[0]).toBe(8);
    expect(ends[1]).toBe(Buffer.byteLength('{"a":1}\n{"b":"é€😀"}\r\n'));
    expect(ends[ends.length - 1]).toBe(Buffer.byteLength(text));
  });

  it('ends as readline ends: a lone CR, a CRLF, breaks only, a character torn by the end of the file', async () => {
    const endings = ['a\nb\r', 'a\r\n', '\r\n\r\n', 'x\r', '\n', '\r', 'a\r\rb', 'é\r\n€'];
    const torn = Buffer.concat([Buffer.from('ok\nab'), Buffer.from('€').subarray(0, 2)]);
    for (const [i, content] of [...endings.map((e) => Buffer.from(e)), torn].entries()) {
      const f = join(dir, `ending-${i}.jsonl`);
      writeFileSync(f, content);
      const expected = await readlineLines(f);
      for (const chunk of [1, 2, 3, 1024])
        expect((await ours(f, chunk)).lines, `${i} at ${chunk}`).toEqual(expected);
    }
  });

  it('reads a line of many chunks whole', async () => {
    const long = join(dir, 'long.jsonl');
    const line = `{"data":"${'x€'.repeat(300_000)}"}`;
    writeFileSync(long, `${line}\r\nnext`);
    const { lines, ends } = await ours(long, 4096);
    expect(lines).toEqual([line, 'next']);
    expect(ends[0]).toBe(Buffer.byteLength(line) + 2);
  });

  it('reads an empty file as no lines', async () => {
    const empty = join(dir, 'empty.jsonl');
    writeFileSync(empty, '');
    expect((await ours(empty, 8)).lines).toEqual([]);
  });
});
