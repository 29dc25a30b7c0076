// Keeps the proxy's conversation index and fix state across restarts in one file, written atomically
// (temp file, fsync, rename) and coalesced: at most one write per interval, never on the request path.

import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync } from 'node:fs';
import { open, rename } from 'node:fs/promises';
import { join } from 'node:path';
import type { ConversationSnapshot } from '../conversation/conversation-store.js';
import { CachewardError } from '../core/errors.js';

/** The document on disk. Fix states are those of each conversation's latest request only. */
export interface StateDocument {
  version: 1;
  conversations: ConversationSnapshot;
  fixStates: Array<[string, Record<string, unknown>]>;
}

/** Options for {@link StateFile}. */
export interface StateFileOptions {
  dir: string;
  /** The least time between two writes (ms). Default 1,000. */
  intervalMs?: number;
  log?: (line: string) => void;
}

const FILE = 'conversations.json';

export class StateFile {
  private readonly path: string;
  private readonly interval: number;
  private readonly log: (line: string) => void;
  private timer: NodeJS.Timeout | undefined;
  private writing: Promise<void> = Promise.resolve();
  private pending: (() => StateDocument) | undefined;

  constructor(options: StateFileOptions) {
    mkdirSync(options.dir, { recursive: true, mode: 0o700 });
    this.path = join(options.dir, FILE);
    this.interval = options.intervalMs ?? 1_000;
    this.log = options.log ?? (() => {});
  }

  /** The saved document, or undefined (none yet, or unreadable: then the proxy starts fresh and says so). */
  load(): StateDocument | undefined {
    try {
      const doc = JSON.parse(readFileSync(this.path, 'utf8')) as StateDocument;
      if (doc.version !== 1 || !doc.conversations)
        throw new CachewardError('CW_STATE_FILE', 'not a cacheward state file');
      return doc;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT')
        this.log(`state in ${this.path} could not be read (starting fresh): ${(err as Error).message}`);
      return undefined;
    }
  }

  /** Asks for a write of `snapshot()` within the interval; many calls in one interval make one write. */
  schedule(snapshot: () => StateDocument): void {
    this.pending = snapshot;
    if (this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.writeNow();
    }, this.interval);
    this.timer.unref();
  }

  /** Writes what is pending now and waits for every write. */
  async flush(): Promise<void> {
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
      .then(() => this.write(JSON.stringify(snapshot())))
      .catch((err) => this.log(`state not saved (it stays in memory): ${String(err)}`));
  }

  private async write(doc: string): Promise<void> {
    const tmp = `${this.path}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
    const h = await open(tmp, 'wx', 0o600);
    try {
      await h.writeFile(doc);
      await h.sync();
    } finally {
      await h.close();
    }
    await rename(tmp, this.path);
  }
}
