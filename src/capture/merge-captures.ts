// Reads the captures of several proxies (files or folders) as one traffic: every file is its own stream
// and the streams are merged by start time; a record met twice (a file named twice, a copied folder) is
// yielded once. Memory: one waiting record per file and the ids of the last hour's records (at most 200,000).

import { realpath } from 'node:fs/promises';
import { captureFiles, type ReadCapturesOptions, type ReadRecord, readCaptures } from './capture-reader.js';

export interface MergeCapturesOptions extends ReadCapturesOptions {
  /** Told about every record skipped because it was already read from another file. */
  onDuplicate?: (record: ReadRecord) => void;
  /** How many recent record ids are remembered to recognise a duplicate. Default 200,000. */
  dedupeWindow?: number;
  /**
   * How long (ms of start times) before the latest record yielded an id is still remembered. Default an
   * hour: a record met twice is the same record, with the same start, and the streams are merged by start,
   * so its copy comes out as soon as the other file gets there (their own disorder is that of records
   * written as they end).
   */
  dedupeMs?: number;
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

/** When a capture file was opened, from its name (`capture-YYYYMMDDTHHMMSS-…`, whole seconds, so never
 * later than its first record); files named otherwise are opened first. */
function fileStart(file: string): number {
  const m = /capture-(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})-[^/]*\.jsonl$/.exec(file);
  if (!m) return Number.NEGATIVE_INFINITY;
  const [, y, mo, d, h, mi, se] = m.map(Number) as number[];
  return Date.UTC(y as number, (mo as number) - 1, d, h, mi, se);
}

export async function* mergeCaptures(
  paths: readonly string[],
  options: MergeCapturesOptions = {},
): AsyncGenerator<ReadRecord> {
  // Files are opened as the merge reaches their start (the time in their name, when it has one), not all
  // at once: 500 open files held ~300 MB of read buffers for records that were not due yet.
  const pending = (await distinctCaptureFiles(paths))
    .map((file) => ({ file, stamp: fileStart(file) }))
    .sort((a, b) => a.stamp - b.stamp);
  const streams: Array<AsyncGenerator<ReadRecord>> = [];
  const heads: Array<ReadRecord | undefined> = [];
  const openDue = async () => {
    for (;;) {
      const first = pending[0];
      if (!first) return;
      let earliest = Number.POSITIVE_INFINITY;
      for (const h of heads) if (h && h.record.times.start < earliest) earliest = h.record.times.start;
      if (first.stamp > earliest) return;
      pending.shift();
      const stream = readCaptures([first.file], options);
      streams.push(stream);
      heads.push((await stream.next()).value ?? undefined);
    }
  };
  const window = options.dedupeWindow ?? 200_000;
  const horizon = options.dedupeMs ?? 3_600_000;
  // Ids in the order they were yielded, with their starts, oldest first from `head` (a queue: the Set's own
  // first value is found by walking the holes every delete at its front leaves).
  const recent = new Set<string>();
  const order: string[] = [];
  const starts: number[] = [];
  let head = 0;
  let latest = Number.NEGATIVE_INFINITY;
  for (;;) {
    await openDue();
    let at = -1;
    for (let i = 0; i < heads.length; i++) {
      const h = heads[i];
      if (h && (at < 0 || h.record.times.start < (heads[at] as ReadRecord).record.times.start)) at = i;
    }
    if (at < 0) return;
    const next = heads[at] as ReadRecord;
    heads[at] = (await (streams[at] as AsyncGenerator<ReadRecord>).next()).value ?? undefined;
    if (!heads[at]) {
      // A file read to its end leaves the merge.
      heads.splice(at, 1);
      streams.splice(at, 1);
    }
    if (recent.has(next.record.id)) {
      options.onDuplicate?.(next);
      continue;
    }
    recent.add(next.record.id);
    order.push(next.record.id);
    starts.push(next.record.times.start);
    if (next.record.times.start > latest) latest = next.record.times.start;
    while (head < order.length && (recent.size > window || (starts[head] as number) < latest - horizon))
      recent.delete(order[head++] as string);
    if (head > 1_024 && head * 2 > order.length) {
      order.splice(0, head);
      starts.splice(0, head);
      head = 0;
    }
    yield next;
  }
}
