// A transcript read as it is written: its bytes as they come, cut into complete lines for the file's adapter,
// the last line held until its newline arrives. Pure: bytes in, requests out; it never opens a file or a timer.

import type { LineWarning, SourceRequest, TranscriptAdapter } from './source-request.js';

/** The longest line held while it is written (a line past it is skipped, with a warning). */
export const MAX_LINE_BYTES = 64 * 1024 * 1024;

const NEWLINE = 0x0a;

export class TranscriptLines {
  /** The bytes of the line not yet ended. */
  private tail: Buffer[] = [];
  private tailBytes = 0;
  /** A line too long to hold is being passed over, up to its newline. */
  private skipping = false;
  /** Lines handed to the adapter so far (its line numbers, as the report counts them). */
  private n = 0;

  constructor(
    private readonly adapter: TranscriptAdapter,
    private readonly warn: LineWarning,
    private readonly maxLine = MAX_LINE_BYTES,
  ) {}

  /** The next bytes of the file, in order (the chunk is not kept: what is held is copied). */
  push(chunk: Buffer): void {
    let from = 0;
    for (let nl = chunk.indexOf(NEWLINE); nl >= 0; nl = chunk.indexOf(NEWLINE, from)) {
      const piece = chunk.subarray(from, nl);
      from = nl + 1;
      if (this.skipping) {
        this.skipping = false;
        this.n++;
        continue;
      }
      this.emit(this.tailBytes ? Buffer.concat([...this.tail, piece]) : piece);
      this.tail = [];
      this.tailBytes = 0;
    }
    if (from >= chunk.length || this.skipping) return;
    const rest = chunk.subarray(from);
    if (this.tailBytes + rest.length > this.maxLine) {
      this.warn(
        this.n + 1,
        `skipped a line longer than ${this.maxLine >= 1024 * 1024 ? `${Math.round(this.maxLine / 1024 / 1024)} MB` : `${this.maxLine} bytes`} (not held while it is written)`,
      );
      this.tail = [];
      this.tailBytes = 0;
      this.skipping = true;
      return;
    }
    this.tail.push(Buffer.from(rest));
    this.tailBytes += rest.length;
  }

  /** Whether a line is waiting for its end. */
  get partial(): boolean {
    return this.tailBytes > 0 || this.skipping;
  }

  /**
   * The file stopped growing. A response that says how it stopped is handed on; with `all` (it stopped for
   * long), the line not yet ended is read as it is (the adapter warns when it is not a whole record) and
   * every open response is handed on.
   */
  settle(all: boolean): void {
    if (all && this.partial) {
      if (this.tailBytes) this.emit(Buffer.concat(this.tail));
      else this.n++;
      this.tail = [];
      this.tailBytes = 0;
      this.skipping = false;
    }
    this.adapter.settle(all);
  }

  /** The requests made so far, each once. */
  take(): SourceRequest[] {
    return this.adapter.ready.splice(0);
  }

  /** When the earliest call still waiting for its response started (the adapter's word). */
  waitingSince(): number | undefined {
    return this.adapter.waitingSince();
  }

  /** Whether a request is ready to take. */
  get ready(): boolean {
    return this.adapter.ready.length > 0;
  }

  private emit(line: Buffer): void {
    this.n++;
    const end = line.length && line[line.length - 1] === 0x0d ? line.length - 1 : line.length;
    this.adapter.line(line.toString('utf8', 0, end), this.n);
  }
}
