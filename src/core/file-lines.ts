// Reads a file as its lines, a chunk at a time, cut where readline cuts them (LF, CRLF, a lone CR), each with
// the byte offset where it ends. It holds two chunks at most (the next is read while one is cut) and the line
// under way; it never writes.

import { open } from 'node:fs/promises';

/** Bytes read at a time: each open file of a merge holds two chunks at most (readline's stream held 64 KB). */
const CHUNK = 256 * 1024;
const LF = 0x0a;
const CR = 0x0d;

/** The lines a chunk completed, and the file offset just past each (its newline included). */
export interface LineBatch {
  lines: string[];
  ends: number[];
}

/**
 * The file's lines in order, batched by the chunk that completed them (one await per chunk, not per line).
 * As readline with `crlfDelay: Infinity`: a CRLF is one break and a lone CR is a break too; the last line
 * is given even without a newline; bytes that are not UTF-8 decode to U+FFFD.
 */
export async function* fileLines(file: string, chunkBytes = CHUNK): AsyncGenerator<LineBatch> {
  const handle = await open(file, 'r');
  const readChunk = async (): Promise<Buffer> => {
    const chunk = Buffer.allocUnsafe(chunkBytes);
    const { bytesRead } = await handle.read(chunk, 0, chunkBytes, null);
    return chunk.subarray(0, bytesRead);
  };
  let next: Promise<Buffer> | undefined;
  try {
    const line = new LineUnderWay();
    let offset = 0;
    next = readChunk();
    for (;;) {
      const read = await next;
      next = undefined;
      if (read.length === 0) break;
      // The next chunk (or the end) is read while this one's lines are handed on.
      next = readChunk();
      const batch: LineBatch = { lines: [], ends: [] };
      line.cut(read, offset, batch);
      offset += read.length;
      if (batch.lines.length) yield batch;
    }
    const batch: LineBatch = { lines: [], ends: [] };
    line.end(offset, batch);
    if (batch.lines.length) yield batch;
  } finally {
    // A read under way when the reader stops early ends before the file is closed (its error is no news).
    await next?.catch(() => undefined);
    await handle.close();
  }
}

/**
 * The line being cut across chunks: its pieces are kept as they came and joined once, at its break, and each
 * chunk is scanned once, so a line of many chunks costs its length, not its length times its chunks.
 */
class LineUnderWay {
  private pieces: Buffer[] = [];
  /** The last chunk ended in a CR, whose line was held until the next byte says whether an LF follows. */
  private pendingCr = false;
  private pendingEnd = 0;

  /** Cuts `chunk` (at file offset `at`) into the lines it ends. */
  cut(chunk: Buffer, at: number, batch: LineBatch): void {
    let from = 0;
    if (this.pendingCr) {
      this.pendingCr = false;
      // A CRLF split between two chunks is one break.
      if (chunk[0] === LF) from = 1;
      this.emit(from === 1 ? at + 1 : this.pendingEnd, batch);
    }
    let lf = chunk.indexOf(LF, from);
    let cr = chunk.indexOf(CR, from);
    for (;;) {
      if (lf < 0 && cr < 0) break;
      const brk = cr >= 0 && (lf < 0 || cr < lf) ? cr : lf;
      this.pieces.push(chunk.subarray(from, brk));
      if (chunk[brk] === CR && brk === chunk.length - 1) {
        // A CR at the chunk's end: its line waits for the next chunk's first byte.
        this.pendingCr = true;
        this.pendingEnd = at + brk + 1;
        return;
      }
      const crlf = chunk[brk] === CR && chunk[brk + 1] === LF;
      from = brk + (crlf ? 2 : 1);
      this.emit(at + from, batch);
      if (lf >= 0 && lf < from) lf = chunk.indexOf(LF, from);
      if (cr >= 0 && cr < from) cr = chunk.indexOf(CR, from);
    }
    // The rest is the line under way, copied (the chunk is not kept).
    if (from < chunk.length) this.pieces.push(Buffer.from(chunk.subarray(from)));
  }

  /** The end of the file: a last line without a break is a line too. */
  end(at: number, batch: LineBatch): void {
    if (this.pendingCr) {
      this.pendingCr = false;
      this.emit(this.pendingEnd, batch);
    }
    if (!this.pieces.length) return;
    // As readline: a character the end of the file tore in two is dropped, not decoded as U+FFFD.
    const bytes = Buffer.concat(this.pieces);
    this.pieces = [bytes.subarray(0, bytes.length - tornTail(bytes))];
    this.emit(at, batch);
  }

  private emit(end: number, batch: LineBatch): void {
    const bytes = this.pieces.length === 1 ? (this.pieces[0] as Buffer) : Buffer.concat(this.pieces);
    this.pieces = [];
    batch.lines.push(bytes.toString('utf8'));
    batch.ends.push(end);
  }
}

/** How many bytes at the end of `b` begin a UTF-8 character that is not complete there (0 to 3). */
function tornTail(b: Buffer): number {
  for (let back = 1; back <= Math.min(3, b.length); back++) {
    const byte = b[b.length - back] as number;
    if ((byte & 0xc0) === 0x80) continue; // a continuation byte: look further back
    const size = byte >= 0xf0 ? 4 : byte >= 0xe0 ? 3 : byte >= 0xc0 ? 2 : 1;
    return size > back ? back : 0;
  }
  return 0;
}
