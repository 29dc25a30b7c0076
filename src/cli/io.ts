// Where the CLI writes, and how it colours: one small object so commands can be run and tested in-process.
// It never colours when NO_COLOR is set or the stream is not a terminal, nor lets a cut-short stdout file pass.

import { fstatSync, readlinkSync, writeSync } from 'node:fs';
import { isDiskFull } from '../core/errors.js';

/** The streams a command writes to, and whether colour is on. */
export interface CliIO {
  out(line: string): void;
  err(line: string): void;
  readonly color: boolean;
  readonly stdin: NodeJS.ReadableStream;
}

/**
 * The process's own streams. Colour follows NO_COLOR (https://no-color.org) and whether stdout is a TTY.
 * Stdout redirected to a file is written with a check of every count (Node's own stream for a file ignores
 * a short write: `report --json > FILE` on a full disk left a cut file and exit 0): the first write that
 * fails calls `onOutFailed` once with why, and nothing more is written to it.
 */
export function processIO(onOutFailed: (why: string) => void = () => {}): CliIO {
  const noColor = process.env.NO_COLOR !== undefined && process.env.NO_COLOR !== '';
  const toFile = stdoutIsFile();
  let failed = false;
  return {
    out: (line) => {
      if (!toFile) {
        process.stdout.write(`${line}\n`);
        return;
      }
      if (failed) return;
      const why = writeWhole(1, Buffer.from(`${line}\n`));
      if (why === undefined) return;
      failed = true;
      onOutFailed(`${stdoutName()}: ${why}; the output there is cut short`);
    },
    err: (line) => process.stderr.write(`${line}\n`),
    color: !noColor && process.stdout.isTTY === true,
    stdin: process.stdin,
  };
}

function stdoutIsFile(): boolean {
  try {
    return fstatSync(1).isFile();
  } catch {
    return false;
  }
}

/** The file stdout goes to, where the system says (Linux), else "stdout". */
function stdoutName(): string {
  try {
    return `stdout (${readlinkSync('/proc/self/fd/1')})`;
  } catch {
    return 'stdout';
  }
}

/** Writes all of `buf` to `fd`, or says why not (a regular file takes fewer bytes only when its disk is full). */
export function writeWhole(
  fd: number,
  buf: Buffer,
  write: (fd: number, buf: Buffer, offset: number, length: number) => number = writeSync,
): string | undefined {
  let done = 0;
  while (done < buf.length) {
    let n: number;
    try {
      n = write(fd, buf, done, buf.length - done);
    } catch (err) {
      const full = isDiskFull(err) ? 'the disk is full: ' : '';
      return `${full}cannot write (${(err as Error).message}) after ${done} of ${buf.length} bytes`;
    }
    if (n <= 0) return `the disk is full: wrote ${done} of ${buf.length} bytes`;
    done += n;
  }
  return undefined;
}

/** ANSI styles that turn into plain text when colour is off. */
export function styles(color: boolean) {
  const wrap = (open: number, close: number) => (s: string) =>
    color ? `\u001b[${open}m${s}\u001b[${close}m` : s;
  return {
    bold: wrap(1, 22),
    dim: wrap(2, 22),
    red: wrap(31, 39),
    green: wrap(32, 39),
    yellow: wrap(33, 39),
    cyan: wrap(36, 39),
  };
}
