// Keeps the proxy's conversation index and fix state across restarts in one file, written atomically
// (temp file, fsync, rename) and coalesced: at most one write per interval, never on the request path.

import { randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, unlinkSync } from 'node:fs';
import { open, rename, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import type { ConversationSnapshot } from '../conversation/conversation-store.js';
import { CachewardError, writeErrorLine } from '../core/errors.js';
import { processAlive } from '../core/process-alive.js';

/** The document as loaded. Fix states are those of each conversation's latest request only. */
export interface StateDocument {
  version: 1;
  conversations: ConversationSnapshot;
  fixStates: Array<[string, Record<string, unknown>]>;
  /** When each saved request stops mattering (ms since the epoch); absent in files from before. */
  expires?: Array<[string, number]>;
}

/**
 * The document as written (version 2): each fix state once, by content hash, in `parts`, and named by its
 * hash in `fixStates` (10,000 Claude Code sessions freeze the same tools: one copy on disk, not 10,000).
 */
export interface StateDocumentV2 {
  version: 2;
  conversations: ConversationSnapshot;
  fixStates: Array<[string, Record<string, string>]>;
  parts: Record<string, unknown>;
  expires?: Array<[string, number]>;
}

/** A document, or its JSON text already composed (parts written from cached JSON). */
export type StateWrite = StateDocument | StateDocumentV2 | string;

/** Options for {@link StateFile}. */
export interface StateFileOptions {
  dir: string;
  /** The least time between two writes (ms). Default 1,000. */
  intervalMs?: number;
  log?: (line: string) => void;
}

const FILE = 'conversations.json';
const TEMP = /^conversations\.json\.(\d+)\.[0-9a-f]+\.tmp$/;

export class StateFile {
  private readonly path: string;
  private readonly interval: number;
  private readonly log: (line: string) => void;
  private timer: NodeJS.Timeout | undefined;
  /** The state was closed: later writes go at once. */
  private closed = false;
  private writing: Promise<void> = Promise.resolve();
  private pending: (() => StateWrite | Promise<StateWrite>) | undefined;
  /** Why the last write failed (a full disk), until one succeeds: said once when it starts, once when it ends. */
  private failing: string | undefined;

  constructor(options: StateFileOptions) {
    mkdirSync(options.dir, { recursive: true, mode: 0o700 });
    this.path = join(options.dir, FILE);
    this.interval = options.intervalMs ?? 1_000;
    this.log = options.log ?? (() => {});
    this.removeStaleTemps(options.dir);
  }

  /** The file state is saved to. */
  get file(): string {
    return this.path;
  }

  /** Why state is not being saved now (the last write failed), or undefined while writes succeed. */
  get saveError(): string | undefined {
    return this.failing;
  }

  /** Temp files a killed process left half-written are removed (those of live processes are theirs). */
  private removeStaleTemps(dir: string): void {
    let names: string[];
    try {
      names = readdirSync(dir);
    } catch {
      return;
    }
    for (const name of names) {
      const m = TEMP.exec(name);
      if (!m || Number(m[1]) === process.pid || processAlive(Number(m[1]))) continue;
      try {
        unlinkSync(join(dir, name));
      } catch {
        // gone already, or not ours to remove
      }
    }
  }

  /** The saved document, or undefined (none yet, or unreadable: then the proxy starts fresh and says so). */
  load(): StateDocument | undefined {
    try {
      const doc = JSON.parse(readFileSync(this.path, 'utf8')) as StateDocument | StateDocumentV2;
      if ((doc.version !== 1 && doc.version !== 2) || !doc.conversations || !Array.isArray(doc.fixStates))
        throw new CachewardError('CW_STATE_FILE', 'not a cacheward state file');
      if (doc.version === 1) return doc;
      const parts = doc.parts ?? {};
      const fixStates = doc.fixStates.map(([request, names]): [string, Record<string, unknown>] => {
        const states: Record<string, unknown> = {};
        for (const [fix, h] of Object.entries(names)) {
          if (!Object.hasOwn(parts, h))
            throw new CachewardError(
              'CW_STATE_FILE',
              `the state of ${fix} for ${request} (part ${h}) is missing`,
            );
          states[fix] = parts[h];
        }
        return [request, states];
      });
      const expires = Array.isArray(doc.expires)
        ? doc.expires.filter(
            (e): e is [string, number] =>
              Array.isArray(e) && typeof e[0] === 'string' && typeof e[1] === 'number',
          )
        : undefined;
      return { version: 1, conversations: doc.conversations, fixStates, ...(expires ? { expires } : {}) };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT')
        this.log(`state in ${this.path} could not be read (starting fresh): ${(err as Error).message}`);
      return undefined;
    }
  }

  /**
   * Asks for a write of `snapshot()` within the interval; many calls in one interval make one write. The
   * snapshot may compose its document over several turns of the event loop (a promise).
   */
  schedule(snapshot: () => StateWrite | Promise<StateWrite>): void {
    this.pending = snapshot;
    // Closed: a commit that came after (an exchange that ended late) is written at once, not on a timer
    // that a process exiting now would never see fire.
    if (this.closed) {
      this.writeNow();
      return;
    }
    if (this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.writeNow();
    }, this.interval);
    this.timer.unref();
  }

  /** Writes what is pending now and waits for every write; with `close`, every later one is written at once. */
  async flush(close = false): Promise<void> {
    if (close) this.closed = true;
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    this.writeNow();
    await this.writing;
  }

  private writeNow(): void {
    const snapshot = this.pending;
    this.pending = undefined;
    if (!snapshot) return;
    this.writing = this.writing
      .then(async () => {
        const doc = await snapshot();
        await this.write(typeof doc === 'string' ? doc : JSON.stringify(doc));
        if (this.failing === undefined) return;
        this.failing = undefined;
        this.log(`state saved again to ${this.path}`);
      })
      .catch((err) => {
        // Said once while it lasts: the next change tries again, and says so only when it works.
        const first = this.failing === undefined;
        this.failing = writeErrorLine(err);
        if (first)
          this.log(
            `state not saved to ${this.path} (it stays in memory; tried again at each change): ${this.failing}`,
          );
      });
  }

  private async write(doc: string): Promise<void> {
    const tmp = `${this.path}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
    const h = await open(tmp, 'wx', 0o600);
    try {
      try {
        await h.writeFile(doc);
        await h.sync();
      } finally {
        await h.close();
      }
      await rename(tmp, this.path);
    } catch (err) {
      // A write the disk refused leaves no temp file behind on that disk (one per attempt filled it further).
      await unlink(tmp).catch(() => {});
      throw err;
    }
  }
}
