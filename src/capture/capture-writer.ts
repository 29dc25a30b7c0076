// Appends capture records to JSONL files (0600 in a 0700 folder), rotating, bounded by --max-mb, with
// full-mode bodies stored as deltas. It never blocks or fails traffic: a write error degrades capture only.

import { chmod, type FileHandle, mkdir, open, readdir, stat, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import type { Clock } from '../core/clock.js';
import { CachewardError } from '../core/errors.js';
import { storeBody } from './body-delta.js';
import {
  type CapturedBlock,
  type CapturedPrefix,
  type CaptureMode,
  type CaptureRecord,
  sameBlock,
} from './capture-record.js';

/** Options for a {@link CaptureWriter}. */
export interface CaptureWriterOptions {
  dir: string;
  mode: CaptureMode;
  clock: Clock;
  /** Total size bound for the folder's capture files; the oldest go first. Default: none. */
  maxBytes?: number;
  /** Start a new file past this size. Default 64 MB. */
  rotateBytes?: number;
  /** Where the writer says what happened (once per state change). */
  log?: (line: string) => void;
  /** Records waiting to be written past which new ones are dropped (and counted). Default 10,000. */
  maxQueue?: number;
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
}

/** The bodies of an exchange, for full mode: what went upstream, and what the client sent if a fix changed it. */
export interface CapturedBodies {
  forwarded: Uint8Array;
  client?: Uint8Array;
}

export const CAPTURE_FILE = /^capture-.*\.jsonl$/;

/** On disk only: the headers are those of the session's previous record in the file. */
export const SAME_HEADERS: Record<string, string> = { '=': 'previous' };
/** On disk only: the folded parameters are those of the base record. */
export const SAME_PARAMS = { tools: { '=': 'base' }, system: {}, messages: {} } as CapturedPrefix['params'];

export class CaptureWriter {
  private readonly opts: Required<Omit<CaptureWriterOptions, 'maxBytes' | 'log'>> &
    Pick<CaptureWriterOptions, 'maxBytes'>;
  private readonly log: (line: string) => void;
  private handle: FileHandle | undefined;
  private file: string | undefined;
  private fileBytes = 0;
  private seq = 0;
  private queue: Array<{ record: CaptureRecord; bodies?: CapturedBodies }> = [];
  private draining: Promise<void> | undefined;
  private readonly lastBody = new Map<string, { id: string; body: Uint8Array }>();
  private readonly lastBlocks = new Map<
    string,
    { id: string; blocks: CapturedBlock[]; params: CapturedPrefix['params'] }
  >();
  private readonly lastHeaders = new Map<string, string>();
  private status: CaptureState;

  constructor(options: CaptureWriterOptions) {
    this.opts = {
      dir: options.dir,
      mode: options.mode,
      clock: options.clock,
      rotateBytes: options.rotateBytes ?? 64 * 1024 * 1024,
      maxQueue: options.maxQueue ?? 10_000,
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
    };
  }

  state(): CaptureState {
    return { ...this.status, ...(this.file ? { file: this.file } : {}) };
  }

  /** Queues a record; returns at once. Full mode stores the bodies as session deltas. */
  write(record: CaptureRecord, bodies?: CapturedBodies): void {
    if (this.opts.mode === 'off') return;
    if (this.queue.length >= this.opts.maxQueue) {
      this.status.dropped++;
      return;
    }
    this.queue.push(this.opts.mode === 'full' && bodies ? { record, bodies } : { record });
    this.startDrain();
  }

  private startDrain(): void {
    if (this.draining) return;
    this.draining = this.drain().finally(() => {
      this.draining = undefined;
      // A record queued between the drain's last check and now still gets written.
      if (this.queue.length) this.startDrain();
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
    await this.flush();
    const h = this.handle;
    this.handle = undefined;
    await h?.close().catch(() => {});
  }

  private async drain(): Promise<void> {
    while (this.queue.length) {
      const item = this.queue.shift();
      if (!item) break;
      try {
        let line = `${JSON.stringify(this.withBodies(item.record, item.bodies))}\n`;
        if (!this.handle || this.fileBytes + Buffer.byteLength(line) > this.opts.rotateBytes) {
          // A new file starts every session's delta chain afresh: the body is stored again against no base.
          await this.rotate();
          line = `${JSON.stringify(this.withBodies(item.record, item.bodies))}\n`;
        }
        await this.append(line);
        const session = item.record.session.key;
        if (item.bodies) this.lastBody.set(session, { id: item.record.id, body: item.bodies.forwarded });
        if (item.record.prefix) {
          const { blocks, params } = item.record.prefix;
          this.lastBlocks.set(session, { id: item.record.id, blocks, params });
        }
        this.lastHeaders.set(session, JSON.stringify(item.record.headers));
        this.status.written++;
        if (this.status.state === 'degraded') {
          this.status.state = 'ok';
          delete this.status.error;
          this.log(`capture recovered: writing to ${this.file}`);
        }
      } catch (err) {
        this.status.failed++;
        const message = (err as NodeJS.ErrnoException).code
          ? `${(err as NodeJS.ErrnoException).code}: ${(err as Error).message}`
          : String(err);
        if (this.status.state !== 'degraded') {
          this.log(`capture degraded, traffic continues: ${message}`);
        }
        this.status.state = 'degraded';
        this.status.error = message;
        // A broken file is not reused: the next record opens a fresh one.
        await this.handle?.close().catch(() => {});
        this.handle = undefined;
      }
    }
  }

  /** The record as stored: its prefix blocks and bodies as deltas from the session's previous record. */
  private withBodies(full: CaptureRecord, bodies: CapturedBodies | undefined): CaptureRecord {
    const key = full.session.key;
    let record = full;
    const prevBlocks = this.lastBlocks.get(key);
    if (full.prefix && prevBlocks) {
      const blocks = full.prefix.blocks;
      let shared = 0;
      while (
        shared < blocks.length &&
        shared < prevBlocks.blocks.length &&
        sameBlock(blocks[shared] as CapturedBlock, prevBlocks.blocks[shared] as CapturedBlock)
      )
        shared++;
      if (shared > 0) {
        record = {
          ...full,
          prefix: { ...full.prefix, base: { id: prevBlocks.id, shared }, blocks: blocks.slice(shared) },
        };
      }
    }
    // Headers the same as the session's previous record, and usage that its raw form says, are not repeated.
    if (this.lastHeaders.get(key) === JSON.stringify(full.headers))
      record = { ...record, headers: SAME_HEADERS };
    if (record.usage?.normalized) record = { ...record, usage: { raw: record.usage.raw } };
    if (!bodies) return record;
    const prev = this.lastBody.get(key);
    const out = { ...record, body: storeBody(bodies.forwarded, prev) };
    if (bodies.client) out.clientBody = storeBody(bodies.client, { id: record.id, body: bodies.forwarded });
    return out;
  }

  private async append(line: string): Promise<void> {
    const bytes = Buffer.byteLength(line);
    const h = this.handle as FileHandle;
    const { bytesWritten } = await h.write(line);
    if (bytesWritten !== bytes)
      throw new CachewardError('CW_CAPTURE_WRITE', `short write (${bytesWritten} of ${bytes} bytes)`);
    this.fileBytes += bytes;
  }

  private async rotate(): Promise<void> {
    await this.handle?.close().catch(() => {});
    this.handle = undefined;
    await mkdir(this.opts.dir, { recursive: true, mode: 0o700 });
    await chmod(this.opts.dir, 0o700);
    const stamp = new Date(this.opts.clock.now()).toISOString().replace(/[-:]/g, '').replace(/\..*$/, '');
    const name = `capture-${stamp}-${process.pid}-${String(++this.seq).padStart(4, '0')}.jsonl`;
    const path = join(this.opts.dir, name);
    const handle = await open(path, 'a', 0o600);
    await handle.chmod(0o600);
    this.handle = handle;
    this.file = path;
    this.fileBytes = (await handle.stat()).size;
    // Chains never cross files, so dropping old files never breaks one.
    this.lastBody.clear();
    this.lastBlocks.clear();
    this.lastHeaders.clear();
    await this.enforceLimit(name);
  }

  private async enforceLimit(current: string): Promise<void> {
    const max = this.opts.maxBytes;
    if (max === undefined) return;
    const names = (await readdir(this.opts.dir)).filter((n) => CAPTURE_FILE.test(n)).sort();
    const sizes = await Promise.all(
      names.map(async (n) => (await stat(join(this.opts.dir, n)).catch(() => ({ size: 0 }))).size),
    );
    let total = sizes.reduce((a, b) => a + b, 0);
    for (let i = 0; i < names.length && total > max; i++) {
      const name = names[i] as string;
      if (name === current) continue;
      await unlink(join(this.opts.dir, name)).catch(() => {});
      total -= sizes[i] as number;
      this.log(`capture: removed ${name} to stay under --max-mb`);
    }
  }
}
