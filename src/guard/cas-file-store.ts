// CasFileStore: documents (memory entries, skill files) written under an inter-process lock, reloaded before
// every mutation, compare-and-swap against the version read earlier, atomically, and in all-or-nothing batches.

import { createHash } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { open, readdir, readFile, rename, stat, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { CachewardError } from '../core/errors.js';

/** A write lost a race: the document changed since this context read it. Re-read and decide again. */
export class CasConflictError extends CachewardError {
  constructor(readonly document: string) {
    super('CW_CAS_CONFLICT', `${document} changed since it was read; re-read it and apply the change again`);
  }
}

/** A write to an existing document that this context never read: refused, so nothing is overwritten blind. */
export class NotReadFirstError extends CachewardError {
  constructor(readonly document: string) {
    super(
      'CW_CAS_NOT_READ',
      `${document} exists and was not read in this context; read it before writing it`,
    );
  }
}

/** The lock could not be taken in time. */
export class LockTimeoutError extends CachewardError {
  constructor(dir: string) {
    super(
      'CW_CAS_LOCK',
      `could not lock ${dir} in time; another writer holds it (its .lock names the process)`,
    );
  }
}

export interface CasDocument {
  content: string;
  version: string;
}

export interface CasFileStoreOptions {
  /** How long to wait for the lock (default 10 s). */
  lockTimeoutMs?: number;
  /** A lock older than this whose process is gone is broken (default 30 s). */
  staleLockMs?: number;
}

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,200}$/;
const versionOf = (content: string) => createHash('sha256').update(content).digest('hex').slice(0, 32);

export class CasFileStore {
  private seq = 0;
  private readonly lockTimeoutMs: number;
  private readonly staleLockMs: number;

  constructor(
    readonly dir: string,
    options: CasFileStoreOptions = {},
  ) {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    this.lockTimeoutMs = options.lockTimeoutMs ?? 10_000;
    this.staleLockMs = options.staleLockMs ?? 30_000;
  }

  /** A unit of work: it remembers the versions it read, and writes only against them. */
  context(): CasContext {
    return new CasContext(this);
  }

  /** @internal */
  path(name: string): string {
    if (!NAME.test(name))
      throw new CachewardError('CW_CAS_NAME', `"${name}" is not a document name (letters, digits, . _ -)`);
    return join(this.dir, name);
  }

  /** @internal The current document, read from disk. */
  async load(name: string): Promise<CasDocument | undefined> {
    try {
      const content = await readFile(this.path(name), 'utf8');
      return { content, version: versionOf(content) };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
  }

  /** @internal Runs `fn` holding the folder's exclusive lock (across processes). */
  async locked<T>(fn: () => Promise<T>): Promise<T> {
    const lock = join(this.dir, '.lock');
    const deadline = Date.now() + this.lockTimeoutMs;
    let delay = 2;
    for (;;) {
      try {
        const h = await open(lock, 'wx', 0o600);
        await h.writeFile(String(process.pid));
        await h.close();
        break;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
        await this.breakStaleLock(lock);
        if (Date.now() > deadline) throw new LockTimeoutError(this.dir);
        await new Promise((r) => setTimeout(r, delay));
        delay = Math.min(50, delay * 2);
      }
    }
    try {
      await this.rollForward();
      return await fn();
    } finally {
      await unlink(lock).catch(() => {});
    }
  }

  private async breakStaleLock(lock: string): Promise<void> {
    try {
      const [s, pid] = await Promise.all([stat(lock), readFile(lock, 'utf8')]);
      const owner = Number(pid);
      let alive = true;
      if (Number.isInteger(owner) && owner > 0) {
        try {
          process.kill(owner, 0);
        } catch (e) {
          alive = (e as NodeJS.ErrnoException).code === 'EPERM';
        }
      }
      if (!alive || Date.now() - s.mtimeMs > this.staleLockMs) await unlink(lock);
    } catch {
      // The lock went away meanwhile, or is being written: try again.
    }
  }

  /** @internal Writes files atomically: temps, fsync, a journal, renames, folder fsync. All or nothing. */
  async commit(entries: ReadonlyArray<{ name: string; content: string }>): Promise<void> {
    const moves: Array<[string, string]> = [];
    for (const e of entries) {
      const tmp = join(this.dir, `.tmp-${process.pid}-${++this.seq}-${e.name}`);
      const h = await open(tmp, 'w', 0o600);
      try {
        await h.writeFile(e.content);
        await h.sync();
      } finally {
        await h.close();
      }
      moves.push([tmp, this.path(e.name)]);
    }
    const journal = join(this.dir, '.journal');
    if (moves.length > 1) {
      const jtmp = `${journal}.tmp`;
      const h = await open(jtmp, 'w', 0o600);
      await h.writeFile(JSON.stringify(moves));
      await h.sync();
      await h.close();
      await rename(jtmp, journal);
      await this.syncDir();
    }
    for (const [from, to] of moves) await rename(from, to);
    await this.syncDir();
    if (moves.length > 1) {
      await unlink(journal);
      await this.syncDir();
    }
  }

  /** A batch interrupted after its journal was written is finished before anyone reads or writes. */
  private async rollForward(): Promise<void> {
    const journal = join(this.dir, '.journal');
    let moves: Array<[string, string]>;
    try {
      moves = JSON.parse(await readFile(journal, 'utf8')) as Array<[string, string]>;
    } catch {
      // No journal (or a journal that was never completed): nothing was renamed; drop stray temps.
      for (const n of await readdir(this.dir)) {
        if (n.startsWith('.tmp-') || n === '.journal.tmp') {
          const pid = Number(n.split('-')[1]);
          if (n === '.journal.tmp' || !isAlive(pid)) await unlink(join(this.dir, n)).catch(() => {});
        }
      }
      return;
    }
    for (const [from, to] of moves) await rename(from, to).catch(() => {});
    await this.syncDir();
    await unlink(journal).catch(() => {});
  }

  private async syncDir(): Promise<void> {
    const h = await open(this.dir, 'r');
    try {
      await h.sync();
    } catch {
      // Some filesystems refuse fsync on a folder; the renames are still atomic.
    } finally {
      await h.close();
    }
  }
}

function isAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** One unit of work against a CasFileStore. */
export class CasContext {
  private readonly seen = new Map<string, string | null>();

  constructor(private readonly store: CasFileStore) {}

  /** Reads a document and remembers its version (or that it did not exist). */
  async read(name: string): Promise<CasDocument | undefined> {
    const doc = await this.store.load(name);
    this.seen.set(name, doc ? doc.version : null);
    return doc;
  }

  /** Writes one document if it is still as this context read it. */
  async write(name: string, content: string): Promise<string> {
    await this.writeAll([{ name, content }]);
    return versionOf(content);
  }

  /** Writes several documents, all or none, each only if still as this context read it. */
  async writeAll(entries: ReadonlyArray<{ name: string; content: string }>): Promise<void> {
    await this.store.locked(async () => {
      for (const e of entries) {
        const current = await this.store.load(e.name);
        const read = this.seen.get(e.name);
        if (current && read === undefined) throw new NotReadFirstError(e.name);
        if ((current?.version ?? null) !== (read ?? null)) throw new CasConflictError(e.name);
      }
      await this.store.commit(entries);
      for (const e of entries) this.seen.set(e.name, versionOf(e.content));
    });
  }
}
