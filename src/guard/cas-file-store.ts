// CasFileStore: documents (memory entries, skill files) kept in one snapshot file, changed under a lock that
// dies with its holder, compare-and-swap against what the context read. It never loses an acknowledged write.

import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { open, readdir, readFile, rename, stat, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { CachewardError } from '../core/errors.js';
import { type HeldLock, lockHolder, tryLock } from './process-lock.js';

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

/** The lock could not be taken in time: a live process holds it (a live holder's lock is never broken). */
export class LockTimeoutError extends CachewardError {
  constructor(
    dir: string,
    readonly holder: number | undefined,
    waitedMs: number,
  ) {
    super(
      'CW_CAS_LOCK',
      `could not lock ${dir} within ${waitedMs} ms: ${holder ? `process ${holder}` : 'another process'} holds it and is still running; nothing was written. Retry later, or raise lockTimeoutMs`,
    );
  }
}

/** The snapshot file is not one this store wrote. */
export class CorruptStoreError extends CachewardError {
  constructor(file: string, detail: string) {
    super(
      'CW_CAS_CORRUPT',
      `${file} is not a cacheward document store (${detail}); move it away or restore it from a backup`,
    );
  }
}

export interface CasDocument {
  content: string;
  version: string;
}

export interface CasFileStoreOptions {
  /** How long a write waits for the lock before failing with {@link LockTimeoutError} (default 10 s). */
  lockTimeoutMs?: number;
}

/** The snapshot: every document of the store, replaced whole by one rename, so readers see a whole batch. */
export const STORE_FILE = 'store.json';
const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,200}$/;
const versionOf = (content: string) => createHash('sha256').update(content).digest('hex').slice(0, 32);

/** Every document of the store, by name: its content. */
export type CasSnapshot = Map<string, string>;

/**
 * Why one snapshot file: a batch becomes visible with one rename(2), so a reader sees every document of a
 * batch or none, and a writer killed at any instant leaves the old snapshot or the new one. The lock only
 * orders writers; it is held by a kernel object that vanishes with its process (see process-lock.ts), so
 * a crashed writer never blocks anyone and a slow one is never overtaken.
 */
export class CasFileStore {
  private readonly lockTimeoutMs: number;

  constructor(
    readonly dir: string,
    options: CasFileStoreOptions = {},
  ) {
    if (typeof dir !== 'string' || dir === '')
      throw new CachewardError(
        'CW_CAS_DIR',
        `new CasFileStore(dir, options?) takes the folder as a string first (got ${dir === '' ? 'an empty string' : typeof dir === 'object' ? 'an object' : typeof dir})`,
      );
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    this.lockTimeoutMs = options.lockTimeoutMs ?? 10_000;
  }

  /** A unit of work: it reads one snapshot of the store, and writes only against the versions it read. */
  context(): CasContext {
    return new CasContext(this);
  }

  /** The pid of the process writing to this store right now, if any. */
  async holder(): Promise<number | undefined> {
    return lockHolder(await this.lockKey(), this.dir);
  }

  /** @internal Throws unless `name` can name a document. */
  checkName(name: string): void {
    if (!NAME.test(name))
      throw new CachewardError('CW_CAS_NAME', `"${name}" is not a document name (letters, digits, . _ -)`);
  }

  /** @internal Every document, as of the last completed write. */
  async snapshot(): Promise<CasSnapshot> {
    const file = join(this.dir, STORE_FILE);
    let text: string;
    try {
      text = await readFile(file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return new Map();
      throw err;
    }
    let doc: unknown;
    try {
      doc = JSON.parse(text);
    } catch {
      throw new CorruptStoreError(file, 'not JSON');
    }
    const { v, documents } = (doc && typeof doc === 'object' ? doc : {}) as {
      v?: unknown;
      documents?: unknown;
    };
    if (v !== 1 || !documents || typeof documents !== 'object' || Array.isArray(documents))
      throw new CorruptStoreError(file, 'no "v": 1 and "documents" object');
    const out: CasSnapshot = new Map();
    for (const [name, content] of Object.entries(documents)) {
      if (typeof content !== 'string') throw new CorruptStoreError(file, `document ${name} is not a string`);
      out.set(name, content);
    }
    return out;
  }

  private async lockKey(): Promise<string> {
    const s = await stat(this.dir, { bigint: true });
    return `${s.dev}:${s.ino}`;
  }

  /** @internal Runs `fn` holding the store's lock (across processes, and across contexts in this one). */
  async locked<T>(fn: () => Promise<T>): Promise<T> {
    const key = await this.lockKey();
    const started = Date.now();
    let lock: HeldLock | undefined;
    for (let delay = 1; ; delay = Math.min(25, delay * 2)) {
      lock = await tryLock(key, this.dir);
      if (lock) break;
      if (Date.now() - started >= this.lockTimeoutMs) {
        throw new LockTimeoutError(this.dir, await lockHolder(key, this.dir), Date.now() - started);
      }
      await new Promise((r) => setTimeout(r, delay * (0.5 + Math.random())));
    }
    try {
      await this.dropTemps();
      return await fn();
    } finally {
      await lock.release();
    }
  }

  /** Under the lock, every temp file is a dead writer's: only the holder writes one. */
  private async dropTemps(): Promise<void> {
    for (const n of await readdir(this.dir)) {
      if (n.startsWith('.tmp-')) await unlink(join(this.dir, n)).catch(() => {});
    }
  }

  /** @internal Under the lock: the new snapshot, durable (temp file, fsync, rename, folder fsync) on return. */
  async commit(documents: CasSnapshot): Promise<void> {
    const tmp = join(this.dir, `.tmp-${process.pid}-${randomBytes(6).toString('hex')}`);
    const h = await open(tmp, 'wx', 0o600);
    try {
      await h.writeFile(JSON.stringify({ v: 1, documents: Object.fromEntries(documents) }));
      await h.sync();
    } finally {
      await h.close();
    }
    await rename(tmp, join(this.dir, STORE_FILE));
    const d = await open(this.dir, 'r');
    try {
      await d.sync();
    } catch {
      // Some filesystems refuse fsync on a folder; the rename is still atomic.
    } finally {
      await d.close();
    }
  }
}

/** One unit of work against a CasFileStore. */
export class CasContext {
  private readonly seen = new Map<string, string | null>();
  private view: Promise<CasSnapshot> | undefined;

  constructor(private readonly store: CasFileStore) {}

  /**
   * Reads a document and remembers its version (or that it did not exist). Every read of a context sees the
   * same snapshot, taken at its first read and renewed by its own writes: never half of someone's batch.
   */
  async read(name: string): Promise<CasDocument | undefined> {
    this.store.checkName(name);
    this.view ??= this.store.snapshot();
    const content = (await this.view).get(name);
    this.seen.set(name, content === undefined ? null : versionOf(content));
    return content === undefined ? undefined : { content, version: versionOf(content) };
  }

  /** Writes one document if it is still as this context read it. */
  async write(name: string, content: string): Promise<string> {
    await this.writeAll([{ name, content }]);
    return versionOf(content);
  }

  /** Writes several documents, all or none, each only if still as this context read it. */
  async writeAll(entries: ReadonlyArray<{ name: string; content: string }>): Promise<void> {
    for (const e of entries) this.store.checkName(e.name);
    await this.store.locked(async () => {
      const current = await this.store.snapshot();
      for (const e of entries) {
        const now = current.get(e.name);
        const read = this.seen.get(e.name);
        if (now !== undefined && read === undefined) throw new NotReadFirstError(e.name);
        if ((now === undefined ? null : versionOf(now)) !== (read ?? null))
          throw new CasConflictError(e.name);
      }
      for (const e of entries) current.set(e.name, e.content);
      await this.store.commit(current);
      for (const e of entries) this.seen.set(e.name, versionOf(e.content));
      this.view = Promise.resolve(current);
    });
  }
}
