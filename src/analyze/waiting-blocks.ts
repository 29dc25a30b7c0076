// Records waiting in the analyzer's reorder window hold one block array per conversation between them, not
// one each. It never changes what a record's blocks are: only which array holds them while it waits.

import type { CapturedBlock, CaptureRecord } from '../capture/capture-record.js';
import { sharedObjects } from './captured-prefix.js';

/** The blocks of a session's waiting records: each one's begin with the first `shared` of them. */
interface Line {
  blocks: CapturedBlock[];
  /** The waiting record whose own array `blocks` is. */
  latest: Waiting | undefined;
  members: number;
  /** The most leading blocks an earlier member takes from `blocks`: a new array must keep that many. */
  needed: number;
}

/** A record in the window, and where its blocks are while it waits. */
export interface Waiting {
  record: CaptureRecord;
  line: Line | undefined;
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

  /** A record joins the window. */
  arrive(record: CaptureRecord): Waiting {
    const prefix = record.prefix;
    if (!prefix) return { record, line: undefined, shared: 0, tail: NO_BLOCKS };
    const blocks = prefix.blocks;
    const key = record.session.key;
    const line = this.lines.get(key);
    const n = line ? sharedObjects(line.blocks, blocks) : 0;
    if (line && n > 0 && n >= line.needed) {
      const latest = line.latest;
      if (latest?.record.prefix) {
        latest.shared = n;
        latest.tail = n < line.blocks.length ? line.blocks.slice(n) : NO_BLOCKS;
        latest.record.prefix.blocks = NO_BLOCKS;
        line.needed = n;
      }
      line.blocks = blocks;
      line.members++;
      const w: Waiting = { record, line, shared: blocks.length, tail: NO_BLOCKS };
      line.latest = w;
      return w;
    }
    // A line of its own (records on the session's previous line keep theirs).
    const own: Line = { blocks, latest: undefined, members: 1, needed: 0 };
    const w: Waiting = { record, line: own, shared: blocks.length, tail: NO_BLOCKS };
    own.latest = w;
    this.lines.set(key, own);
    return w;
  }

  /** A record leaves the window to be analyzed: its blocks are a whole array of its own again. */
  leave(w: Waiting): CaptureRecord {
    const { record, line } = w;
    if (!line) return record;
    w.line = undefined;
    if (line.latest === w) line.latest = undefined;
    else if (record.prefix) {
      const blocks = new Array<CapturedBlock>(w.shared + w.tail.length);
      for (let i = 0; i < w.shared; i++) blocks[i] = line.blocks[i] as CapturedBlock;
      for (let i = 0; i < w.tail.length; i++) blocks[w.shared + i] = w.tail[i] as CapturedBlock;
      record.prefix.blocks = blocks;
    }
    if (--line.members === 0 && this.lines.get(record.session.key) === line)
      this.lines.delete(record.session.key);
    return record;
  }
}
