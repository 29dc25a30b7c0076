// Reads a file as its lines, a chunk at a time, cut where readline cuts them (LF, CRLF, a lone CR), each with
// the byte offset where it ends. It holds two chunks at most (the next is read while one is cut) and the line
// under way; it never writes.

import { open } from 'node:fs/promises';

/** Bytes read at a time: each open file of a merge holds two chunks at most (readline's stream held 64 KB). */
const CHUNK = 256 * 1024;
const LF = 0x0a;

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
    let carry: Buffer | undefined;
    let carryAt = 0;
    let offset = 0;
    next = readChunk();
    for (;;) {
      const read = await next;
      next = undefined;
      if (read.length === 0) break;
      // The next chunk (or the end) is read while this one's lines are handed on.
      next = readChunk();
      const buf: Buffer = carry ? Buffer.concat([carry, read]) : read;
      const base = carry ? carryAt : offset;
      offset += read.length;
      const batch: LineBatch = { lines: [], ends: [] };
      let from = 0;
      for (let nl = buf.indexOf(LF); nl >= 0; nl = buf.indexOf(LF, from)) {
        cut(buf.toString('utf8', from, nl), true, base + nl + 1, batch);
        from = nl + 1;
      }
      // The line under way, copied (the chunk is not kept).
      carry = from < buf.length ? Buffer.from(buf.subarray(from)) : undefined;
      carryAt = base + from;
      if (batch.lines.length) yield batch;
    }
    if (carry) {
      const batch: LineBatch = { lines: [], ends: [] };
      cut(carry.toString('utf8'), false, offset, batch);
      yield batch;
    }
  } finally {
    // A read under way when the reader stops early ends before the file is closed (its error is no news).
    await next?.catch(() => undefined);
    await handle.close();
  }
}

/** Adds one LF-ended piece as readline's lines: split at each CR (the CR of a CRLF ends the piece's last). */
function cut(text: string, newline: boolean, end: number, batch: LineBatch): void {
  if (!text.includes('\r')) {
    batch.lines.push(text);
    batch.ends.push(end);
    return;
  }
  const parts = text.split('\r');
  if (newline && parts[parts.length - 1] === '') parts.pop();
  for (const p of parts) {
    batch.lines.push(p);
    batch.ends.push(end);
  }
}
