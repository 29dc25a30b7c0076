// Reads the captures of several proxies (files or folders) as one traffic: every file is its own stream
// and the streams are merged by start time; a record met twice (a file named twice, a copied folder) is
// yielded once, and so is a call met both in a capture and in an agent's transcript (same session, model and
// usage, started within seconds). Memory: one waiting record per file and the last hour's ids (at most 200,000).
// It never changes a record or writes a file.

import { realpath } from 'node:fs/promises';
import { mapBounded } from '../core/map-bounded.js';
import { SourceRecords } from '../sources/source-records.js';
import { transcriptStart } from '../sources/transcript-files.js';
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
    const files = await captureFiles(p);
    // Resolved together (one wait, not one per file).
    const reals = await Promise.all(files.map((f) => realpath(f)));
    for (const [i, f] of files.entries()) {
      const real = reals[i] as string;
      if (seen.has(real)) continue;
      seen.add(real);
      out.push(f);
    }
  }
  return out;
}

/** When a capture file was opened, from its name (`capture-YYYYMMDDTHHMMSS-…`, whole seconds, so never
 * later than its first record); an agent transcript, at the first time it records; files that say neither are
 * opened first. */
async function fileStart(file: string): Promise<number> {
  const m = /capture-(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})-[^/]*\.jsonl$/.exec(file);
  if (!m) return (await transcriptStart(file).catch(() => undefined)) ?? Number.NEGATIVE_INFINITY;
  const [, y, mo, d, h, mi, se] = m.map(Number) as number[];
  return Date.UTC(y as number, (mo as number) - 1, d, h, mi, se);
}

/** A capture file's name (any other file is read as an agent transcript). */
const CAPTURE_NAME = /(^|\/)capture-[^/]*\.jsonl$/;

/** How far apart (ms) a capture's start and a transcript's can be for one call (client and proxy clocks). */
const SAME_CALL_MS = 10_000;

/** What one call is in any source: its session, model and the usage the provider reported (or its refusal). */
function callKey(r: ReadRecord['record']): string | undefined {
  const u = r.usage?.normalized;
  if (!u)
    return r.status !== undefined && r.status >= 400
      ? `${r.session.key}\u0000${r.model ?? ''}\u0000${r.status}`
      : undefined;
  return `${r.session.key}\u0000${r.model ?? ''}\u0000${u.inputTotal}/${u.cacheRead}/${u.cacheWrite}/${u.output}`;
}

export async function* mergeCaptures(
  paths: readonly string[],
  options: MergeCapturesOptions = {},
): AsyncGenerator<ReadRecord> {
  // Files are opened as the merge reaches their start (the time in their name, when it has one), not all
  // at once: every open file holds read buffers for records that are not due yet.
  const pending: Array<{ file: string; stamp: number }> = [];
  const files = await distinctCaptureFiles(paths);
  const stamps = await mapBounded(files, 16, fileStart);
  for (const [i, file] of files.entries()) pending.push({ file, stamp: stamps[i] as number });
  pending.sort((a, b) => a.stamp - b.stamp);
  // One maker of transcript records for every file: its prefix builder extends each body from the last.
  const sourced = { ...options, sources: options.sources ?? new SourceRecords() };
  const streams: Array<AsyncGenerator<ReadRecord>> = [];
  const heads: Array<ReadRecord | undefined> = [];
  /** Whether each stream is an agent transcript (not a capture file). */
  const transcript: boolean[] = [];
  /** Whether the next file to open is due: it may hold a record before every open stream's next. */
  const due = (): boolean => {
    const first = pending[0];
    if (!first) return false;
    let earliest = Number.POSITIVE_INFINITY;
    for (const h of heads) if (h && h.record.times.start < earliest) earliest = h.record.times.start;
    return first.stamp <= earliest;
  };
  const openDue = async () => {
    while (due()) {
      const first = pending.shift() as { file: string; stamp: number };
      const stream = readCaptures([first.file], sourced);
      const head = (await stream.next()).value ?? undefined;
      if (!head) continue;
      streams.push(stream);
      heads.push(head);
      transcript.push(!CAPTURE_NAME.test(first.file));
    }
  };
  const window = options.dedupeWindow ?? 200_000;
  const horizon = options.dedupeMs ?? 3_600_000;
  // Ids in the order they were yielded, with their starts, oldest first from `head` (a queue: the Set's own
  // first value is found by walking the holes every delete at its front leaves).
  const recent = new Set<string>();
  const order: string[] = [];
  const starts: number[] = [];
  // The same for calls (see callKey), with where each was read: a capture's call met again in a transcript.
  const calls = new Map<string, Array<{ start: number; transcript: boolean; paired: boolean }>>();
  // Only a transcript among the files can pair with a capture's call: without one, no key is made.
  const pairing = pending.some((p) => !CAPTURE_NAME.test(p.file));
  const callKeys: Array<string | undefined> = [];
  let head = 0;
  let latest = Number.NEGATIVE_INFINITY;
  for (;;) {
    // Checked before awaiting: most records open no file, and an await per record costs a turn of the loop.
    if (due()) await openDue();
    let at = -1;
    for (let i = 0; i < heads.length; i++) {
      const h = heads[i];
      if (h && (at < 0 || h.record.times.start < (heads[at] as ReadRecord).record.times.start)) at = i;
    }
    if (at < 0) return;
    const next = heads[at] as ReadRecord;
    const fromTranscript = transcript[at] as boolean;
    heads[at] = (await (streams[at] as AsyncGenerator<ReadRecord>).next()).value ?? undefined;
    if (!heads[at]) {
      // A file read to its end leaves the merge.
      heads.splice(at, 1);
      streams.splice(at, 1);
      transcript.splice(at, 1);
    }
    if (recent.has(next.record.id)) {
      options.onDuplicate?.(next);
      continue;
    }
    const key = pairing ? callKey(next.record) : undefined;
    const start = next.record.times.start;
    const met = key === undefined ? undefined : calls.get(key);
    // Each call read from the other kind of source pairs with one only (retries of a refused call look alike).
    const twin = met?.find(
      (c) => !c.paired && c.transcript !== fromTranscript && Math.abs(c.start - start) <= SAME_CALL_MS,
    );
    if (twin) {
      twin.paired = true;
      options.onDuplicate?.(next);
      continue;
    }
    if (key !== undefined) {
      const entry = { start, transcript: fromTranscript, paired: false };
      if (met) met.push(entry);
      else calls.set(key, [entry]);
    }
    callKeys.push(key);
    recent.add(next.record.id);
    order.push(next.record.id);
    starts.push(next.record.times.start);
    if (next.record.times.start > latest) latest = next.record.times.start;
    while (head < order.length && (recent.size > window || (starts[head] as number) < latest - horizon)) {
      const old = callKeys[head];
      if (old !== undefined) {
        const list = calls.get(old);
        list?.shift();
        if (!list?.length) calls.delete(old);
      }
      recent.delete(order[head++] as string);
    }
    if (head > 1_024 && head * 2 > order.length) {
      order.splice(0, head);
      starts.splice(0, head);
      callKeys.splice(0, head);
      head = 0;
    }
    yield next;
  }
}
