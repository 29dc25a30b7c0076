// Fix state per session, kept in atomic JSON files so it survives a proxy restart: written to a temp file,
// fsynced and renamed into place, so a reader (or a second proxy) sees the old state or the new, never a torn one.

import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync } from 'node:fs';
import { mkdir, open, rename } from 'node:fs/promises';
import { join } from 'node:path';

/** Temp-file names are unique across every store in the process (two stores may share one folder). */
let tempSeq = 0;
const tempTag = `${process.pid}.${randomBytes(4).toString('hex')}`;

/** States by fix name, for one session. */
export type SessionStates = Map<string, unknown>;

/**
 * Why atomic files and not better-sqlite3: one small document per session, read once and rewritten whole,
 * needs no native addon; rename(2) is atomic, so two proxies on one folder never corrupt a file (the last
 * write of a session wins, and each write is a complete state).
 */
export class SessionStateStore {
  private readonly cache = new Map<string, SessionStates>();
  private readonly writing = new Map<string, Promise<void>>();

  constructor(
    private readonly dir: string | undefined,
    private readonly log: (line: string) => void = () => {},
  ) {
    if (dir) mkdirSync(dir, { recursive: true, mode: 0o700 });
  }

  private file(session: string): string {
    return join(
      this.dir as string,
      `${createHash('sha256').update(session).digest('hex').slice(0, 32)}.json`,
    );
  }

  /** The states of a session: from memory, else from its file, else empty. */
  get(session: string): SessionStates {
    const known = this.cache.get(session);
    if (known) return known;
    let states: SessionStates = new Map();
    if (this.dir) {
      try {
        const doc = JSON.parse(readFileSync(this.file(session), 'utf8')) as {
          session: string;
          states: Record<string, unknown>;
        };
        if (doc.session === session) states = new Map(Object.entries(doc.states));
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT')
          this.log(`fix state for a session could not be read (starting fresh): ${(err as Error).message}`);
      }
    }
    this.cache.set(session, states);
    return states;
  }

  /** Replaces a session's states in memory now, and on disk atomically (in order, off the request path). */
  set(session: string, states: SessionStates): void {
    this.cache.set(session, states);
    if (!this.dir) return;
    const doc = JSON.stringify({ session, states: Object.fromEntries(states) });
    const prev = this.writing.get(session) ?? Promise.resolve();
    const next = prev
      .then(() => this.write(session, doc))
      .catch((err) => this.log(`fix state not saved (it stays in memory): ${String(err)}`));
    this.writing.set(session, next);
  }

  private async write(session: string, doc: string): Promise<void> {
    const target = this.file(session);
    const tmp = `${target}.${tempTag}.${++tempSeq}.tmp`;
    await mkdir(this.dir as string, { recursive: true, mode: 0o700 });
    // 'wx': a name that somehow exists already is an error, never a second writer in the same file.
    const h = await open(tmp, 'wx', 0o600);
    try {
      await h.writeFile(doc);
      await h.sync();
    } finally {
      await h.close();
    }
    await rename(tmp, target);
  }

  /** Waits for every pending write. */
  async flush(): Promise<void> {
    await Promise.all(this.writing.values());
  }

  /** Forgets what is in memory (the next `get` reads the files again, as after a restart). */
  forget(): void {
    this.cache.clear();
  }
}
