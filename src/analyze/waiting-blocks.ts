// Records waiting in the analyzer's reorder window hold one block array per conversation between them, not
// one each. It never changes what a record's blocks are: only which array holds them while it waits.

import type { CapturedBlock, CaptureRecord } from '../record/capture-record.js';
import {
  type BlockLine,
  canTakeOver,
  type LineMember,
  lineOf,
  memberBlocks,
  sharedRange,
  takeOver,
} from './block-line.js';

/** A record in the window, and where its blocks are while it waits. */
export interface Waiting extends LineMember<CapturedBlock> {
  record: CaptureRecord;
}

const NO_BLOCKS: CapturedBlock[] = [];

/**
 * The capture reader gives every record a whole block array (its delta base's blocks, the same objects,
 * then its own): 256 waiting records of a 10,000-turn session held 256 arrays of 20,000 references (41
 * MB). Here a record whose blocks share a range with the session's latest waiting record's takes over as
 * the holder; the one before keeps its own blocks around that range (Claude Code's moved tools and system
 * before it, the block whose marker moved after it), and gets a whole array again as it leaves.
 */
export class WaitingBlocks {
  private readonly lines = new Map<string, BlockLine<CapturedBlock>>();

  /** A record joins the window. */
  arrive(record: CaptureRecord): Waiting {
    const prefix = record.prefix;
    const blocks = prefix?.blocks ?? NO_BLOCKS;
    const key = record.session.key;
    const line = prefix ? this.lines.get(key) : undefined;
    const range = line ? sharedRange(line.blocks, blocks) : undefined;
    if (line && range && canTakeOver(line, range)) {
      const { member } = takeOver(line, blocks, range);
      const former = member as Waiting | undefined;
      if (former?.record.prefix) former.record.prefix.blocks = NO_BLOCKS;
      return this.join(line, record);
    }
    // A line of its own (records on the session's previous line keep theirs).
    const own = lineOf(blocks);
    if (prefix) this.lines.set(key, own);
    return this.join(own, record);
  }

  private join(line: BlockLine<CapturedBlock>, record: CaptureRecord): Waiting {
    const w: Waiting = { record, line, head: NO_BLOCKS, to: line.blocks.length, tail: NO_BLOCKS };
    line.latest = w;
    line.members++;
    return w;
  }

  /** A record leaves the window to be analyzed: its blocks are a whole array of its own again. */
  leave(w: Waiting): CaptureRecord {
    const { record, line } = w;
    if (!record.prefix) return record;
    if (line.latest === w) line.latest = undefined;
    else record.prefix.blocks = memberBlocks(w);
    if (--line.members === 0 && this.lines.get(record.session.key) === line)
      this.lines.delete(record.session.key);
    return record;
  }
}
