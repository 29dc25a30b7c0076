// One transcript file followed as its agent writes it: the bytes added since the last look, and whether the file
// was truncated, replaced or rewritten under its name (then it is read again from its start). A shell: it reads
// the file and never writes it; it holds one chunk at a time besides what its adapter keeps of the session.

import { type FileHandle, open, stat } from 'node:fs/promises';
import type { CaptureRecord } from '../record/capture-record.js';
import type { TranscriptLines } from '../sources/transcript-lines.js';

/** Bytes read at a time (what readline reads at a time for the report). */
export const CHUNK = 64 * 1024;
/** Bytes just before the offset compared before reading on: a file rewritten in place differs there. */
const PRINT = 64;

/** What one look at the file found. */
export type FileLook =
  /** Nothing new since the last look. */
  | 'same'
  /** More bytes were read (or the end was reached with some still to settle). */
  | 'read'
  /** The file is not where it was (deleted or renamed away). */
  | 'gone';

/** Why a file was read again from its start. */
export type RestartReason = 'truncated' | 'replaced' | 'rewritten';

export interface FollowedFileOptions {
  path: string;
  /** A new line reader (with a new adapter) for the file's start. */
  lines: () => TranscriptLines;
  /** When the file last grew, as far as is known (its modification time when it is first seen). */
  lastGrowth: number;
  /** Told when the file is read again from its start. */
  onRestart?: (reason: RestartReason) => void;
}

export class FollowedFile {
  readonly path: string;
  lines: TranscriptLines;
  /** Records made of its requests, not yet handed on (the merge takes them by start time). */
  readonly queue: CaptureRecord[] = [];
  /** When the file last grew (its modification time when it was read, never later than the look). */
  lastGrowth: number;
  /** Whether the last look reached the end of what was written. */
  atEnd = false;
  /** No call of the file is expected to start before this (its last call's start, or its first time). */
  nextStart = Number.NEGATIVE_INFINITY;
  /**
   * The latest of its calls handed on that the analysis took into a conversation: while the analysis still
   * holds it, the file's history is there for its next call.
   */
  previous: string | undefined;
  private offset = 0;
  private ino = -1;
  private dev = -1;
  private mtimeMs = -1;
  private print: Buffer = Buffer.alloc(0);

  constructor(private readonly o: FollowedFileOptions) {
    this.path = o.path;
    this.lines = o.lines();
    this.lastGrowth = o.lastGrowth;
  }

  /** A reader of the same file from its start, with a new adapter (to give its history again). */
  fromStart(): FollowedFile {
    return new FollowedFile({ path: this.path, lines: this.o.lines, lastGrowth: this.lastGrowth });
  }

  /** The file as last looked at (modification time, size, inode): a file let go is taken up when it changes. */
  get statKey(): string {
    return `${this.mtimeMs}:${this.offset}:${this.ino}`;
  }

  /** Bytes read so far from the file's current start. */
  get bytesRead(): number {
    return this.offset;
  }

  /**
   * Reads on from where the last read stopped, one chunk (the caller reads again while it wants more): new
   * complete lines go to the adapter. `scratch` is where the bytes are read to (nothing of it is kept, so one
   * buffer serves every read that is not under way at the same time). A file that is shorter than what was read, another file under the same
   * name, or different bytes just before the offset is read again from its start.
   */
  async read(now: number, scratch: Buffer = Buffer.allocUnsafe(CHUNK)): Promise<FileLook> {
    const s = await stat(this.path).catch(() => undefined);
    if (!s?.isFile()) return 'gone';
    let restart: RestartReason | undefined;
    if (this.ino >= 0 && (s.ino !== this.ino || s.dev !== this.dev)) restart = 'replaced';
    else if (s.size < this.offset) restart = 'truncated';
    if (!restart && s.size === this.offset && s.mtimeMs === this.mtimeMs) {
      this.atEnd = true;
      return 'same';
    }
    let handle: FileHandle;
    try {
      handle = await open(this.path, 'r');
    } catch {
      return 'gone';
    }
    try {
      if (!restart && this.offset > 0 && !(await this.samePrint(handle))) restart = 'rewritten';
      if (restart) this.restart(restart);
      this.ino = s.ino;
      this.dev = s.dev;
      this.mtimeMs = s.mtimeMs;
      const { bytesRead } = await handle.read(scratch, 0, scratch.length, this.offset);
      this.atEnd = this.offset + bytesRead >= s.size;
      if (!bytesRead) return 'same';
      const chunk = scratch.subarray(0, bytesRead);
      this.offset += bytesRead;
      this.lastGrowth = Math.min(now, s.mtimeMs);
      this.print =
        bytesRead >= PRINT
          ? Buffer.from(chunk.subarray(bytesRead - PRINT))
          : Buffer.concat([this.print, chunk]).subarray(-PRINT);
      this.lines.push(chunk);
      return 'read';
    } finally {
      await handle.close();
    }
  }

  /** Whether the bytes before the offset are still those read there. */
  private async samePrint(handle: FileHandle): Promise<boolean> {
    const n = Math.min(this.print.length, this.offset);
    const buf = Buffer.alloc(n);
    const { bytesRead } = await handle.read(buf, 0, n, this.offset - n);
    return bytesRead === n && buf.equals(this.print.subarray(this.print.length - n));
  }

  private restart(reason: RestartReason): void {
    this.offset = 0;
    this.nextStart = Number.NEGATIVE_INFINITY;
    this.print = Buffer.alloc(0);
    this.lines = this.o.lines();
    this.o.onRestart?.(reason);
  }
}
