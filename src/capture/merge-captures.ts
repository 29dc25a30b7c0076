// Reads the captures of several proxies (files or folders) as one traffic: every file is its own stream
// and the streams are merged by start time; a record met twice (a file named twice, a copied folder) is
// yielded once. Memory: one waiting record per file and a bounded window of recent record ids.

import { realpath } from 'node:fs/promises';
import { captureFiles, type ReadCapturesOptions, type ReadRecord, readCaptures } from './capture-reader.js';

export interface MergeCapturesOptions extends ReadCapturesOptions {
  /** Told about every record skipped because it was already read from another file. */
  onDuplicate?: (record: ReadRecord) => void;
  /** How many recent record ids are remembered to recognise a duplicate. Default 200,000. */
  dedupeWindow?: number;
}

/** The distinct capture files the paths name, each once (by its real path), in the order given. */
export async function distinctCaptureFiles(paths: readonly string[]): Promise<string[]> {
  const seen = new Set<string>();
  const out: string[] = [];
  for (const p of paths) {
    for (const f of await captureFiles(p)) {
      const real = await realpath(f);
      if (seen.has(real)) continue;
      seen.add(real);
      out.push(f);
    }
  }
  return out;
}

export async function* mergeCaptures(
  paths: readonly string[],
  options: MergeCapturesOptions = {},
): AsyncGenerator<ReadRecord> {
  const files = await distinctCaptureFiles(paths);
  const streams = files.map((f) => readCaptures([f], options));
  const heads: Array<ReadRecord | undefined> = await Promise.all(
    streams.map(async (s) => (await s.next()).value ?? undefined),
  );
  const window = options.dedupeWindow ?? 200_000;
  const recent = new Set<string>();
  for (;;) {
    let at = -1;
    for (let i = 0; i < heads.length; i++) {
      const h = heads[i];
      if (h && (at < 0 || h.record.times.start < (heads[at] as ReadRecord).record.times.start)) at = i;
    }
    if (at < 0) return;
    const next = heads[at] as ReadRecord;
    heads[at] = (await (streams[at] as AsyncGenerator<ReadRecord>).next()).value ?? undefined;
    if (recent.has(next.record.id)) {
      options.onDuplicate?.(next);
      continue;
    }
    recent.add(next.record.id);
    if (recent.size > window) {
      const oldest = recent.values().next().value;
      if (oldest !== undefined) recent.delete(oldest);
    }
    yield next;
  }
}
