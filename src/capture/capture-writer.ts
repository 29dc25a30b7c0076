// Appends capture records to JSONL files (0600; folders it creates 0700), rotating, held under --max-mb as it
// writes, full-mode bodies stored as deltas. It never blocks or fails traffic: a write error degrades capture only.

import { randomBytes } from 'node:crypto';
import { chmod, type FileHandle, mkdir, open, readdir, stat, unlink } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import type { Clock } from '../core/clock.js';
import { CachewardError, writeErrorLine } from '../core/errors.js';
import { runStepped } from '../core/stepped-work.js';
import {
  blockDelta,
  type CapturedPrefix,
  type CaptureMode,
  type CaptureRecord,
} from '../record/capture-record.js';
import { storeBody } from './body-delta.js';
import { jsonLineSteps } from './json-line-steps.js';
import { type NotCapturedMarker, NotCapturedTally } from './not-captured.js';
import { type SessionBase, SessionBases } from './session-bases.js';

/** Options for a {@link CaptureWriter}. */
export interface CaptureWriterOptions {
  dir: string;
  mode: CaptureMode;
  clock: Clock;
  /** Total size bound for the folder's capture files, kept as records are written; the oldest go first. */
  maxBytes?: number;
  /** Start a new file past this size. Default 64 MB, and at most a quarter of `maxBytes`. */
  rotateBytes?: number;
  /** Where the writer says what happened (once per state change). */
  log?: (line: string) => void;
  /** Records waiting to be written past which new ones are dropped (and counted). Default 10,000. */
  maxQueue?: number;
  /**
   * Bytes waiting to be written (bodies kept for full mode, and an estimate of each record, until they are
   * on disk) past which new records are taken without their bodies, then dropped (and counted): a slow disk
   * cannot make the queue hold memory without bound. Default 64 MB; a single record larger than this is
   * still taken when nothing is waiting.
   */
  maxQueueBytes?: number;
  /**
   * Full mode: the longest a body may wait to be on disk, at the rate this writer has been writing. A record
   * whose body would wait longer is taken without it (counted as `bodiesDropped`; the record says
   * `bodyDropped`), so a kill -9 loses at most the bodies taken in about this long. Default 100 ms; a body
   * is still taken when nothing is waiting.
   */
  maxQueueMs?: number;
  /**
   * When the first file is opened: `now` (default; a server, whose first burst should not wait for it), or
   * with the first record (an in-process wrapper that may never be used leaves no empty file behind).
   */
  openFirst?: 'now' | 'with-first-record';
}

/** What a queued record holds in memory, roughly: its bodies and its prefix blocks. */
function queuedSize(record: CaptureRecord, bodies: CapturedBodies | undefined): number {
  return (
    512 +
    (record.prefix?.blocks.length ?? 0) * 256 +
    (bodies ? bodies.forwarded.length + (bodies.client?.length ?? 0) : 0)
  );
}

/** What the health endpoint reports about capture. */
export interface CaptureState {
  mode: CaptureMode;
  state: 'ok' | 'degraded' | 'off';
  dir: string;
  file?: string;
  error?: string;
  written: number;
  dropped: number;
  failed: number;
  /**
   * Full mode: records written without their request body because the writer was too far behind to keep
   * it within its time bound (the record is whole otherwise: the report counts the exchange; replay skips it).
   */
  bodiesDropped: number;
  /**
   * Of `dropped` + `failed`: exchanges whose not-captured marker is not on disk yet (the disk refused it
   * too). Only the stop line and health can say them: a report on the files cannot count them.
   */
  unmarked: number;
}

/** The bodies of an exchange, for full mode: what went upstream, and what the client sent if a fix changed it. */
export interface CapturedBodies {
  forwarded: Uint8Array;
  client?: Uint8Array;
}

export const CAPTURE_FILE = /^capture-.*\.jsonl$/;

/**
 * The capture files writers of this process hold open: a name open in one is never opened by another, so
 * two writers started in the same second (a proxy and a wrapFetch, two wrappers) never write into one file
 * at once, where each would take the other's records for its sessions' previous ones. One entry per writer.
 */
const namesOpen = new Set<string>();

/** On disk only: the headers are those of the session's previous record in the file. */
export const SAME_HEADERS: Record<string, string> = { '=': 'previous' };
/** On disk only: the folded parameters are those of the base record. */
export const SAME_PARAMS = { tools: { '=': 'base' }, system: {}, messages: {} } as CapturedPrefix['params'];

/** Lines written in one system call at most; a longer queue is written in several. */
const BATCH_BYTES = 4 * 1024 * 1024;

/** A record with more blocks than this, or bodies larger than {@link STEPPED_BODY_BYTES}, is serialized in
 * steps with other work between them; a smaller one in one JSON.stringify. */
const STEPPED_BLOCKS = 1024;
const STEPPED_BODY_BYTES = 1024 * 1024;
/** How long a stepped serialization runs before it gives the event loop back (ms). */
const STEP_SLICE_MS = 4;

/**
 * The window a kill -9 can lose: records are queued when an exchange ends and every queued record is written
 * in one batch on the next turn of the event loop; a large record is serialized in steps of a few ms, and a
 * full-mode body is taken only while it can be on disk within `maxQueueMs` at the rate measured (else the
 * record goes without it), so only records taken in about that long are still in memory, and a body that
 * alone takes longer while it is written. Nothing is fsynced: a crash of the process loses nothing written;
 * a crash of the machine may.
 */
export class CaptureWriter {
  private readonly opts: Required<Omit<CaptureWriterOptions, 'maxBytes' | 'log' | 'openFirst'>> &
    Pick<CaptureWriterOptions, 'maxBytes'>;
  private readonly log: (line: string) => void;
  private handle: FileHandle | undefined;
  private file: string | undefined;
  /** close() was called: a record written after it leaves no file open. */
  private closed = false;
  /** The name (resolved) this writer holds in {@link namesOpen}, while its file is open. */
  private nameHeld: string | undefined;
  private fileBytes = 0;
  /** Bytes of capture files in the folder (counted at each new file, then added to as this writer appends). */
  private folderBytes = 0;
  private seq = 0;
  private queue: Array<{ record: CaptureRecord; bodies?: CapturedBodies; size: number }> = [];
  /** Bytes of the records taken and not yet on disk (queued, or in the batch being written). */
  private pendingBytes = 0;
  /**
   * How fast records reach the disk, decayed over recent batches: bytes (as {@link queuedSize} counts
   * them) over the wall time from a batch's first record taken up to its write done. It starts at 50 MB/s
   * worth one 100 ms batch: well below what a disk keeps up with, so the first bodies are not over-promised.
   */
  private readonly rate = { bytes: 5 * 1024 * 1024, ms: 100 };
  /** When each record not yet on disk was taken (performance.now()), oldest first from `takenHead`. */
  private readonly takenTimes: number[] = [];
  private takenHead = 0;
  private draining: Promise<void> | undefined;
  private readonly bases = new SessionBases();
  /** Exchanges dropped or failed and not yet said in a marker line (not-captured.ts). */
  private readonly untold = new NotCapturedTally(`nc_${process.pid}_${randomBytes(4).toString('hex')}`);
  private dirChecked = false;
  /** The current file did not exist before this writer opened it. */
  private createdEmpty = false;
  private status: CaptureState;

  constructor(options: CaptureWriterOptions) {
    const rotate = options.rotateBytes ?? 64 * 1024 * 1024;
    this.opts = {
      dir: options.dir,
      mode: options.mode,
      clock: options.clock,
      rotateBytes:
        options.maxBytes !== undefined
          ? Math.max(1, Math.min(rotate, Math.floor(options.maxBytes / 4)))
          : rotate,
      maxQueue: options.maxQueue ?? 10_000,
      maxQueueBytes: options.maxQueueBytes ?? 64 * 1024 * 1024,
      maxQueueMs: options.maxQueueMs ?? 100,
      ...(options.maxBytes !== undefined ? { maxBytes: options.maxBytes } : {}),
    };
    this.log = options.log ?? (() => {});
    this.status = {
      mode: options.mode,
      state: options.mode === 'off' ? 'off' : 'ok',
      dir: options.dir,
      written: 0,
      dropped: 0,
      failed: 0,
      bodiesDropped: 0,
      unmarked: 0,
    };
    // The first file is opened now (unless asked otherwise), not when the first record is due: under a burst, opening it then took
    // hundreds of milliseconds of event-loop turns while every record waited in memory.
    if (options.mode !== 'off' && options.openFirst !== 'with-first-record') {
      this.draining = this.rotate()
        .catch((err) => this.failed(err, 0))
        .finally(() => {
          this.draining = undefined;
          if (this.queue.length) this.startDrain();
        });
    }
  }

  state(): CaptureState {
    return { ...this.status, unmarked: this.untold.count, ...(this.file ? { file: this.file } : {}) };
  }

  /**
   * Queues a record; returns at once. Full mode stores the bodies as session deltas. Full mode's bodies are
   * let go when they would wait past the time bound or pass the byte bound (the record is queued without
   * them: the exchange is still counted and analyzed); a record is dropped only past the byte or count
   * bound. Both are counted, and a drop is said in the capture.
   */
  write(record: CaptureRecord, bodies?: CapturedBodies): void {
    if (this.opts.mode === 'off') return;
    let kept = this.opts.mode === 'full' ? bodies : undefined;
    let size = queuedSize(record, kept);
    if (this.full(size) || (kept && this.late(size))) {
      const lean = queuedSize(record, undefined);
      if (!kept || this.full(lean)) {
        this.status.dropped++;
        this.untold.add('dropped', 1, this.opts.clock.now());
        return;
      }
      this.status.bodiesDropped++;
      record = withKey(record, 'bodyDropped', true as const);
      kept = undefined;
      size = lean;
    }
    this.pendingBytes += size;
    this.takenTimes.push(performance.now());
    this.queue.push(kept ? { record, bodies: kept, size } : { record, size });
    this.startDrain();
  }

  /** Whether `size` more would pass the queue's count or byte bound (one record is taken when none waits). */
  private full(size: number): boolean {
    if (this.queue.length >= this.opts.maxQueue) return true;
    return this.pendingBytes > 0 && this.pendingBytes + size > this.opts.maxQueueBytes;
  }

  /**
   * Whether `size` more would be on disk past the time bound: at the rate seen, or because the oldest
   * record still waiting has waited that long already (a starved event loop). A record that alone takes
   * longer than half the bound to write counts as half: it is taken whenever what is ahead of it takes
   * less than half (its own write is then the only thing to outlast the bound).
   */
  private late(size: number): boolean {
    if (this.pendingBytes === 0) return false;
    const max = this.opts.maxQueueMs;
    const own = Math.min(size, (this.rate.bytes / this.rate.ms) * (max / 2));
    const oldest = this.takenTimes[this.takenHead];
    return (
      ((this.pendingBytes + own) * this.rate.ms) / this.rate.bytes > max ||
      (oldest !== undefined && performance.now() - oldest > max)
    );
  }

  /** `count` records (of `bytes` as queued) are on disk, failed or dropped: no longer waiting. */
  private settled(count: number, bytes: number): void {
    this.pendingBytes -= bytes;
    this.takenHead += count;
    if (this.takenHead >= this.takenTimes.length) {
      this.takenTimes.length = 0;
      this.takenHead = 0;
    } else if (this.takenHead > 1024 && this.takenHead * 2 > this.takenTimes.length) {
      this.takenTimes.splice(0, this.takenHead);
      this.takenHead = 0;
    }
  }

  private startDrain(): void {
    if (this.draining) return;
    this.draining = this.drain().finally(() => {
      this.draining = undefined;
      // A record queued between the drain's last check and now still gets written.
      if (this.queue.length) this.startDrain();
      // One that came after close() (an exchange that ended late) is written, and its file closed again.
      else if (this.closed) void this.closeFile();
    });
  }

  /** Resolves once every queued record has been written (or has failed). */
  async flush(): Promise<void> {
    while (this.draining || this.queue.length) {
      this.startDrain();
      await this.draining;
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.flush();
    // Exchanges lost while writes failed, with no record written since to carry their marker: one more
    // try at the stop (the disk may have room again); a report on the files can count them only then.
    if (this.untold.pending) await this.writeMarker();
    await this.closeFile();
  }

  private async closeFile(): Promise<void> {
    const h = this.handle;
    const unused = this.createdEmpty && this.fileBytes === 0 ? this.file : undefined;
    this.handle = undefined;
    this.letNameGo();
    await h?.close().catch(() => {});
    // A file opened in advance that no record reached is not left behind (nor named by health).
    if (unused) {
      this.file = undefined;
      await unlink(unused).catch(() => {});
    }
  }

  /** Writes everything queued, in as few batches as the rotation size and --max-mb allow. */
  private async drain(): Promise<void> {
    while (this.queue.length) {
      const items = this.queue.splice(0);
      let batch: Buffer[] = [];
      let batchBytes = 0;
      let batchRecords = 0;
      // What the batch's records were counted as while pending, and when its first one was taken up.
      let batchSize = 0;
      let batchStart = performance.now();
      const flushBatch = async () => {
        if (!batch.length) return;
        const lines = batch;
        let bytes = batchBytes;
        const records = batchRecords;
        const size = batchSize;
        batch = [];
        batchBytes = 0;
        batchRecords = 0;
        batchSize = 0;
        // Exchanges not captured so far are said first, in the same write.
        const marker = this.untold.take();
        if (marker) {
          const line = markerLine(marker);
          lines.unshift(line);
          bytes += line.length;
        }
        try {
          await this.commit(lines, bytes, records);
          this.measured(size, performance.now() - batchStart);
        } catch (err) {
          if (marker) this.untold.restore(marker);
          // Every record of the batch shares the fate of the write that failed.
          await this.failed(err, records);
        }
        this.settled(records, size);
        batchStart = performance.now();
      };
      for (const item of items) {
        if (!batchRecords) batchStart = performance.now();
        try {
          if (!this.handle) await this.rotate();
          const made = this.line(item);
          let line = made instanceof Promise ? await made : made;
          let bytes = line.bytes;
          if (this.opts.maxBytes !== undefined && bytes > this.opts.maxBytes) {
            this.status.dropped++;
            this.untold.add('dropped', 1, this.opts.clock.now());
            this.log(`capture: a record of ${bytes} bytes is larger than --max-mb; it was not written`);
            this.settled(1, item.size);
            continue;
          }
          if (
            this.fileBytes + batchBytes + bytes > this.opts.rotateBytes &&
            this.fileBytes + batchBytes > 0
          ) {
            await flushBatch();
            // A new file starts every session's delta chain afresh: the body is stored again against no base.
            await this.rotate();
            const again = this.line(item);
            line = again instanceof Promise ? await again : again;
            bytes = line.bytes;
          }
          this.remember(item.record, item.bodies);
          for (const piece of line.pieces) batch.push(piece);
          batchBytes += bytes;
          batchRecords++;
          batchSize += item.size;
        } catch (err) {
          this.settled(1, item.size);
          await this.failed(err, 1);
          continue;
        }
        if (batchBytes >= BATCH_BYTES) await flushBatch();
      }
      await flushBatch();
    }
    // Drops counted after the last batch was made: said now, in a line of their own. Not while writes fail
    // (a file opened for it would only be removed again): the next record's batch says it then.
    if (this.status.state !== 'degraded') await this.writeMarker();
  }

  /** Writes what is not captured and not yet said, in a line of its own. */
  private async writeMarker(): Promise<void> {
    const marker = this.untold.take();
    if (!marker) return;
    try {
      if (!this.handle) await this.rotate();
      const line = markerLine(marker);
      await this.commit([line], line.length, 0);
    } catch (err) {
      this.untold.restore(marker);
      await this.failed(err, 0);
    }
  }

  /**
   * One record as the bytes of its line. A small one in one JSON.stringify, encoded once; a large one (a
   * 100,000-message prefix, a body of megabytes) in steps of a few ms with the event loop given back
   * between them (json-line-steps: the same bytes), so other clients' streams move meanwhile. Synchronous
   * (no turn of the event loop) for a small record.
   */
  private line(item: {
    record: CaptureRecord;
    bodies?: CapturedBodies;
  }): { pieces: Buffer[]; bytes: number } | Promise<{ pieces: Buffer[]; bytes: number }> {
    const stored = this.withBodies(item.record, item.bodies);
    const bodyBytes = (item.bodies?.forwarded.length ?? 0) + (item.bodies?.client?.length ?? 0);
    if ((stored.prefix?.blocks.length ?? 0) <= STEPPED_BLOCKS && bodyBytes <= STEPPED_BODY_BYTES) {
      const json = JSON.stringify(stored);
      const out = Buffer.allocUnsafe(Buffer.byteLength(json) + 1);
      out[out.write(json)] = 0x0a;
      return { pieces: [out], bytes: out.length };
    }
    return runStepped(jsonLineSteps(stored), STEP_SLICE_MS);
  }

  /** Takes a batch's rate into the running one (older batches count less and less). */
  private measured(bytes: number, ms: number): void {
    this.rate.bytes = this.rate.bytes * 0.7 + bytes;
    this.rate.ms = this.rate.ms * 0.7 + Math.max(ms, 0.01);
  }

  /** Appends one batch (`count` records), first removing the oldest files so the folder stays under --max-mb. */
  private async commit(lines: Buffer[], bytes: number, count: number): Promise<void> {
    await this.makeRoom(bytes);
    const h = this.handle as FileHandle;
    const { bytesWritten } = await h.writev(lines);
    this.fileBytes += bytesWritten;
    this.folderBytes += bytesWritten;
    // A regular file takes fewer bytes than given only when its disk (or quota) has no room left.
    if (bytesWritten !== bytes)
      throw new CachewardError(
        'CW_CAPTURE_WRITE',
        `the disk is full: ${this.file} took ${bytesWritten} of ${bytes} bytes`,
      );
    this.status.written += count;
    if (this.status.state === 'degraded') {
      this.status.state = 'ok';
      delete this.status.error;
      this.log(`capture recovered: writing to ${this.file}`);
    }
  }

  /** Counts the records as failed once the broken file is closed (and removed if empty): health never
   * reports a failure whose empty file is still in the folder. */
  private async failed(err: unknown, records: number): Promise<void> {
    const message = writeError(err, this.file);
    if (this.status.state !== 'degraded') this.log(`capture degraded, traffic continues: ${message}`);
    this.status.state = 'degraded';
    this.status.error = message;
    // A broken file is not reused: the next record opens a fresh one. One this writer created and could not
    // write a byte to is removed, so a full disk does not fill the folder with empty files.
    const h = this.handle;
    const emptyFile = this.createdEmpty && this.fileBytes === 0 ? this.file : undefined;
    this.handle = undefined;
    this.letNameGo();
    this.createdEmpty = false;
    this.bases.clear();
    await h?.close().catch(() => {});
    if (emptyFile) {
      // Health names no file that is gone.
      if (this.file === emptyFile) this.file = undefined;
      await unlink(emptyFile).catch(() => {});
    }
    this.status.failed += records;
    this.untold.add('failed', records, this.opts.clock.now());
  }

  /** What the next record of this session is stored against. */
  private remember(record: CaptureRecord, bodies: CapturedBodies | undefined): void {
    const next: SessionBase = {};
    if (bodies) next.body = { id: record.id, body: bodies.forwarded };
    if (record.prefix)
      next.blocks = { id: record.id, blocks: record.prefix.blocks, params: record.prefix.params };
    next.headers = JSON.stringify(record.headers);
    this.bases.set(record.session.key, next);
  }

  /** The record as stored: its prefix blocks and bodies as deltas from the session's previous record. */
  private withBodies(full: CaptureRecord, bodies: CapturedBodies | undefined): CaptureRecord {
    const key = full.session.key;
    const base = this.bases.get(key);
    let record = full;
    const prevBlocks = base?.blocks;
    if (full.prefix && prevBlocks) {
      const blocks = full.prefix.blocks;
      // Shared blocks that moved in the body (Claude Code's tools and system after its messages) are
      // written as runs of the same shift, not again whole.
      const { shared, moved } = blockDelta(blocks, prevBlocks.blocks);
      if (shared > 0) {
        const base = moved.length ? { id: prevBlocks.id, shared, moved } : { id: prevBlocks.id, shared };
        // Copies with keys added after (on Node 20 a spread followed by a key its source lacks takes a slow
        // runtime path). The same keys in the same order.
        const prefix = withKey(full.prefix, 'base', base);
        prefix.blocks = blocks.slice(shared);
        record = { ...full, prefix };
      }
    }
    // Headers the same as the session's previous record, and usage that its raw form says, are not repeated.
    if (base?.headers === JSON.stringify(full.headers)) record = { ...record, headers: SAME_HEADERS };
    if (record.usage?.normalized) record = { ...record, usage: { raw: record.usage.raw } };
    if (!bodies) return record;
    const out = withKey(record, 'body', storeBody(bodies.forwarded, base?.body));
    if (bodies.client) out.clientBody = storeBody(bodies.client, { id: record.id, body: bodies.forwarded });
    return out;
  }

  /** The file this writer held is closed: another writer of the process may take its name. */
  private letNameGo(): void {
    if (this.nameHeld !== undefined) namesOpen.delete(this.nameHeld);
    this.nameHeld = undefined;
  }

  private async rotate(): Promise<void> {
    await this.handle?.close().catch(() => {});
    this.handle = undefined;
    this.letNameGo();
    await this.ensureDir();
    const stamp = new Date(this.opts.clock.now()).toISOString().replace(/[-:]/g, '').replace(/\..*$/, '');
    let path: string;
    do {
      const name = `capture-${stamp}-${process.pid}-${String(++this.seq).padStart(4, '0')}.jsonl`;
      path = join(this.opts.dir, name);
    } while (namesOpen.has(resolve(path)));
    this.nameHeld = resolve(path);
    namesOpen.add(this.nameHeld);
    const existed = await stat(path).then(
      () => true,
      () => false,
    );
    const handle = await open(path, 'a', 0o600);
    this.handle = handle;
    this.file = path;
    this.createdEmpty = !existed;
    await handle.chmod(0o600);
    this.fileBytes = (await handle.stat()).size;
    // Chains never cross files, so dropping old files never breaks one.
    this.bases.clear();
    this.folderBytes = await this.countFolder();
  }

  /** Folders this writer creates are 0700; a folder that existed is left as it is, with a warning if open. */
  private async ensureDir(): Promise<void> {
    const first = await mkdir(this.opts.dir, { recursive: true, mode: 0o700 });
    if (first !== undefined) {
      // Every folder from the first one created down to the capture folder is this writer's.
      const chain: string[] = [];
      const top = resolve(first);
      for (let d = resolve(this.opts.dir); ; d = dirname(d)) {
        chain.push(d);
        if (d === top || dirname(d) === d) break;
      }
      for (const d of chain) await chmod(d, 0o700);
      this.dirChecked = true;
      return;
    }
    if (this.dirChecked) return;
    this.dirChecked = true;
    const mode = (await stat(this.opts.dir)).mode & 0o777;
    if (mode & 0o077) {
      this.log(
        `capture folder ${this.opts.dir} is readable by other users (mode ${mode.toString(8)}): capture files are 0600, but run chmod 700 ${this.opts.dir} to hide their names and sizes`,
      );
    }
  }

  private async countFolder(): Promise<number> {
    if (this.opts.maxBytes === undefined) return 0;
    const names = (await readdir(this.opts.dir)).filter((n) => CAPTURE_FILE.test(n));
    const sizes = await Promise.all(
      names.map(async (n) => (await stat(join(this.opts.dir, n)).catch(() => ({ size: 0 }))).size),
    );
    return sizes.reduce((a, b) => a + b, 0);
  }

  /** Removes the oldest capture files (never the one being written) until `bytes` more fit under --max-mb. */
  private async makeRoom(bytes: number): Promise<void> {
    const max = this.opts.maxBytes;
    if (max === undefined || this.folderBytes + bytes <= max) return;
    const current = this.file ? this.file.slice(this.opts.dir.length + 1) : undefined;
    const names = (await readdir(this.opts.dir)).filter((n) => CAPTURE_FILE.test(n) && n !== current).sort();
    this.folderBytes = (await this.countFolder()) || this.folderBytes;
    for (const name of names) {
      if (this.folderBytes + bytes <= max) break;
      const size = (await stat(join(this.opts.dir, name)).catch(() => ({ size: 0 }))).size;
      await unlink(join(this.opts.dir, name)).catch(() => {});
      this.folderBytes -= size;
      this.log(`capture: removed ${name} to stay under --max-mb`);
    }
  }
}

/**
 * A write error as one line: its code once (Node's messages start with it already: `ENOSPC: no space left
 * on device, write`), `ENOSPC` said as the full disk it is, and the file named when the message does not.
 */
export function writeError(err: unknown, file: string | undefined): string {
  const text = writeErrorLine(err);
  // An error of open or mkdir names its own path already.
  if ((err as NodeJS.ErrnoException).path !== undefined) return text;
  return file && !text.includes(file) ? `${text}, writing ${file}` : text;
}

/** A marker as its line. */
function markerLine(m: NotCapturedMarker): Buffer {
  return Buffer.from(`${JSON.stringify(m)}\n`);
}

/** `{ ...o, [key]: value }` (the key last unless `o` has it), without the spread's slow path for a new key. */
function withKey<T extends object, K extends string, V>(o: T, key: K, value: V): T & Record<K, V> {
  const out = Object.assign({}, o) as T & Record<K, V>;
  (out as Record<K, V>)[key] = value;
  return out;
}
