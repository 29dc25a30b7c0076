// An inter-process lock that dies with its holder: the kernel drops it when the holding process exits, however
// it exits (kill -9 included). It never guesses that a holder is dead, so it never breaks a lock under a live one.

import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import { type FileHandle, open } from 'node:fs/promises';
import { connect, createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { CachewardError } from '../core/errors.js';

/** This platform offers none of the locks this module knows how to take. */
export class LockUnsupportedError extends CachewardError {
  constructor(detail: string) {
    super(
      'CW_LOCK_UNSUPPORTED',
      `no inter-process lock that dies with its holder is available on ${process.platform} (${detail}); use Linux, macOS, a BSD or Windows`,
    );
  }
}

/** A lock this process holds; `release` lets the next process in. */
export interface HeldLock {
  release(): Promise<void>;
}

/**
 * How the lock is taken, by platform:
 * - Linux: listening on an abstract Unix socket named after the key. Only one socket can listen on a name;
 *   the name has no file, so nothing is left behind, and it vanishes when the process does.
 * - Windows: the same with a named pipe.
 * - macOS and the BSDs: `open(O_EXLOCK | O_NONBLOCK)` on `<dir>/.cas-lock`, a flock(2) lock that the
 *   kernel drops when the file is closed or its process dies. The file stays; it never blocks anyone.
 * Linux sockets are per network namespace: processes in two containers sharing a folder but not a network
 * namespace do not exclude each other.
 */
type Mechanism = 'abstract-socket' | 'named-pipe' | 'flock-open';

function mechanism(): Mechanism {
  if (process.platform === 'linux' || process.platform === 'android') return 'abstract-socket';
  if (process.platform === 'win32') return 'named-pipe';
  return 'flock-open';
}

const O_EXLOCK = 0x20; // macOS, FreeBSD, OpenBSD, NetBSD; Node does not export the constant.

function socketName(key: string): string {
  const id = createHash('sha256').update(key).digest('hex').slice(0, 40);
  return process.platform === 'win32' ? `\\\\?\\pipe\\cacheward-lock-${id}` : `\0cacheward-lock-${id}`;
}

/**
 * Takes the lock named `key` (for a folder: its device and inode) if it is free. `dir` is where the
 * flock-based mechanism keeps its lock file. Resolves undefined when another holder has it.
 */
export async function tryLock(key: string, dir: string): Promise<HeldLock | undefined> {
  return mechanism() === 'flock-open' ? tryFlock(dir) : tryListen(socketName(key));
}

/** The pid of the process holding the lock, if one does and says so. */
export async function lockHolder(key: string, dir: string): Promise<number | undefined> {
  if (mechanism() === 'flock-open') return flockHolder(dir);
  return new Promise((resolve) => {
    let text = '';
    const socket = connect(socketName(key));
    const done = (pid: number | undefined) => {
      socket.destroy();
      resolve(pid);
    };
    socket.setTimeout(1_000, () => done(undefined));
    socket.on('data', (d: Buffer) => {
      text += d;
    });
    socket.on('end', () => done(Number.parseInt(text, 10) || undefined));
    socket.on('error', () => done(undefined));
  });
}

function tryListen(name: string): Promise<HeldLock | undefined> {
  // Whoever connects is told who holds the lock (for messages), then hung up on.
  const server: Server = createServer((s) => {
    s.on('error', () => {});
    s.end(`${process.pid}\n`);
  });
  return new Promise((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'EADDRINUSE') resolve(undefined);
      else reject(err);
    });
    // exclusive: never share the handle with cluster workers; each process takes its own.
    server.listen({ path: name, exclusive: true }, () => {
      server.unref();
      resolve({
        release: () => new Promise<void>((r) => server.close(() => r())),
      });
    });
  });
}

let flockChecked: Promise<void> | undefined;

/** Once per process: a second O_EXLOCK open must be refused, or this platform ignores the flag. */
function checkFlock(dir: string): Promise<void> {
  flockChecked ??= (async () => {
    const path = join(dir, '.cas-lock-check');
    const flags = constants.O_RDWR | constants.O_CREAT | constants.O_NONBLOCK | O_EXLOCK;
    const first = await open(path, flags, 0o600);
    try {
      const second = await open(path, flags, 0o600).catch((e: NodeJS.ErrnoException) => e);
      if (!(second instanceof Error)) {
        await second.close();
        throw new LockUnsupportedError('open(O_EXLOCK) does not lock');
      }
      if (second.code !== 'EAGAIN' && second.code !== 'EWOULDBLOCK') throw second;
    } finally {
      await first.close();
    }
  })();
  return flockChecked;
}

async function tryFlock(dir: string): Promise<HeldLock | undefined> {
  await checkFlock(dir);
  let handle: FileHandle;
  try {
    handle = await open(
      join(dir, '.cas-lock'),
      constants.O_RDWR | constants.O_CREAT | constants.O_NONBLOCK | O_EXLOCK,
      0o600,
    );
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EAGAIN' || code === 'EWOULDBLOCK') return undefined;
    throw err;
  }
  await handle.truncate(0);
  await handle.write(`${process.pid}\n`, 0);
  return { release: () => handle.close() };
}

async function flockHolder(dir: string): Promise<number | undefined> {
  // Free if it can be taken; else the pid its holder wrote (a holder always writes it before working).
  const probe = await tryFlock(dir);
  if (probe) {
    await probe.release();
    return undefined;
  }
  const h = await open(join(dir, '.cas-lock'), 'r').catch(() => undefined);
  if (!h) return undefined;
  try {
    return Number.parseInt(await h.readFile('utf8'), 10) || undefined;
  } finally {
    await h.close();
  }
}
