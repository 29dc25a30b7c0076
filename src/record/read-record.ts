// One capture record as a reader hands it on, whatever its source (a capture file, an agent's transcript):
// the record, where it was read, and in full mode its rebuilt bodies. A type only; it never reads anything.

import type { CaptureRecord } from './capture-record.js';

/** One record as read, with where it came from and, in full mode, its rebuilt bodies. */
export interface ReadRecord {
  record: CaptureRecord;
  file: string;
  line: number;
  /** The bytes forwarded upstream (full mode). */
  body?: Buffer;
  /** The bytes the client sent, when a fix changed them (full mode). */
  clientBody?: Buffer;
}
