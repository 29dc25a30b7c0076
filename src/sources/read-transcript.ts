// Reads one agent transcript as a stream of capture records, the same shape the capture reader yields: lines
// go to the agent's adapter, requests through the prefix model. A shell (reads the file); memory holds what the
// adapter needs of one session, never the file.

import { stat } from 'node:fs/promises';
import { fileLines } from '../core/file-lines.js';
import type { ReadRecord } from '../record/read-record.js';
import { SourceRecords } from './source-records.js';
import type { SourceRequest } from './source-request.js';
import { transcriptAdapter } from './transcript-adapter.js';
import type { SourceKind } from './transcript-kind.js';

/** What a transcript's reading tells its caller (the capture reader's options of the same names). */
export interface ReadTranscriptOptions {
  /** Told about every line the adapter could not use: `file:line: why`. */
  onWarning?: (message: string) => void;
  /** Hand on the bodies rebuilt exactly (default true). */
  bodies?: boolean;
  /** Told how far the file has been read: bytes so far, and the file's size. */
  onProgress?: (file: string, bytes: number, size: number) => void;
}

export async function* readTranscript(
  file: string,
  kind: Exclude<SourceKind, 'capture'>,
  options: ReadTranscriptOptions,
  sources: SourceRecords = new SourceRecords(),
): AsyncGenerator<ReadRecord> {
  const warn = (line: number, message: string) => options.onWarning?.(`${file}:${line}: ${message}`);
  const adapter = transcriptAdapter(file, kind, warn);
  const size = (await stat(file)).size;
  const bodies = options.bodies !== false;
  const made = (req: SourceRequest): ReadRecord => {
    const out: ReadRecord = { record: sources.record(req), file, line: req.line };
    // Only a body rebuilt exactly stands for what was sent (a replay runs fixes on it).
    if (bodies && req.exact) out.body = req.body;
    return out;
  };
  let n = 0;
  for await (const { lines, ends } of fileLines(file))
    for (let i = 0; i < lines.length; i++) {
      n++;
      if (n % 1000 === 0) options.onProgress?.(file, ends[i] as number, size);
      adapter.line(lines[i] as string, n);
      while (adapter.ready.length) yield made(adapter.ready.shift() as SourceRequest);
    }
  adapter.end();
  while (adapter.ready.length) yield made(adapter.ready.shift() as SourceRequest);
  options.onProgress?.(file, size, size);
}
