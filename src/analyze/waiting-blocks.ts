// Records waiting in the analyzer's reorder window hold one block array per conversation between them, not
// one each. It never changes what a record's blocks are: only which array holds them while it waits.

import type { CapturedBlock, CaptureRecord } from '../capture/capture-record.js';

/** The blocks of a session's waiting records: each one's begin with the first `shared` of them. */
interface Line {
  blocks: CapturedBlock[];
  /** The waiting record whose own array `blocks` is. */
  latest: CaptureRecord | undefined;
  members: number;
  /** The most leading blocks an earlier member takes from `blocks`: a new array must keep that many. */
  needed: number;
}

interface Held {
  line: Line;
  shared: number;
  /** Its blocks past `shared` (the block whose cache marker the next turn moved, say). */
  tail: CapturedBlock[];
}

const NO_BLOCKS: CapturedBlock[] = [];

/**
 * The capture reader gives every record a whole block array (its delta base's blocks, the same objects,
 * then its own): 256 waiting records of a 10,000-turn session held 256 arrays of 20,000 references (41
 * MB). Here a record whose blocks begin with the session's latest waiting record's takes over as the holder;
 * the one before keeps a count and its last differing blocks, and gets a whole array again as it leaves.
 */
export class WaitingBlocks {
  private readonly lines = new Map<string, Line>();
  private readonly held = new Map<CaptureRecord, Held>();

  /** A record joins the window. */
  arrive(r: CaptureRecord): void {
    const prefix = r.prefix;
    if (!prefix || this.held.has(r)) return;
    const blocks = prefix.blocks;
    const key = r.session.key;
    const line = this.lines.get(key);
    let n = 0;
    if (line) {
      const max = Math.min(blocks.length, line.blocks.length);
      while (n < max && blocks[n] === line.blocks[n]) n++;
    }
    if (line && n > 0 && n >= line.needed) {
      const latest = line.latest;
      const h = latest ? this.held.get(latest) : undefined;
      if (latest?.prefix && h) {
        h.shared = n;
        h.tail = n < line.blocks.length ? line.blocks.slice(n) : NO_BLOCKS;
        latest.prefix.blocks = NO_BLOCKS;
        line.needed = n;
      }
      line.blocks = blocks;
      line.latest = r;
      line.members++;
      this.held.set(r, { line, shared: blocks.length, tail: NO_BLOCKS });
    } else {
      // A line of its own (records on the session's previous line keep theirs).
      const own: Line = { blocks, latest: r, members: 1, needed: 0 };
      this.lines.set(key, own);
      this.held.set(r, { line: own, shared: blocks.length, tail: NO_BLOCKS });
    }
  }

  /** A record leaves the window to be analyzed: its blocks are a whole array of its own again. */
  leave(r: CaptureRecord): void {
    const h = this.held.get(r);
    if (!h) return;
    this.held.delete(r);
    const line = h.line;
    if (line.latest === r) line.latest = undefined;
    else if (r.prefix) {
      const blocks = new Array<CapturedBlock>(h.shared + h.tail.length);
      for (let i = 0; i < h.shared; i++) blocks[i] = line.blocks[i] as CapturedBlock;
      for (let i = 0; i < h.tail.length; i++) blocks[h.shared + i] = h.tail[i] as CapturedBlock;
      r.prefix.blocks = blocks;
    }
    if (--line.members === 0 && this.lines.get(r.session.key) === line) this.lines.delete(r.session.key);
  }
}
