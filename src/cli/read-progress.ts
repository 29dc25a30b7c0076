// One line on a terminal telling how far the report has read its inputs (files and bytes of them all),
// rewritten in place and cleared when reading ends. Never writes to a stream that is not a terminal.

import { stat } from 'node:fs/promises';

/** Where the line goes: stderr, or a test's stand-in. */
export interface ProgressStream {
  isTTY?: boolean;
  write(text: string): unknown;
}

export interface ReadProgress {
  /** A reader's report: `bytes` of `file` (of `size`) read so far. */
  onProgress(file: string, bytes: number, size: number): void;
  /** Reading is over: the line is cleared. */
  done(): void;
}

/** Rewrites at most this often (ms). */
const EVERY_MS = 200;
const CLEAR = '\r\u001b[K';

const mb = (n: number) => (n / 1024 / 1024).toFixed(n < 10 * 1024 * 1024 ? 1 : 0);
const count = (n: number) => n.toLocaleString('en-US');

/**
 * A progress line over `files` (their sizes taken now), or undefined when `stream` is not a terminal.
 * `now` is the clock the throttle reads.
 */
export async function readProgress(
  files: readonly string[],
  stream: ProgressStream = process.stderr,
  now: () => number = Date.now,
): Promise<ReadProgress | undefined> {
  if (!stream.isTTY) return undefined;
  const sizes = await Promise.all(
    files.map((f) =>
      stat(f).then(
        (s) => s.size,
        () => 0,
      ),
    ),
  );
  const total = sizes.reduce((a, b) => a + b, 0);
  const read = new Map<string, number>();
  let bytes = 0;
  let finished = 0;
  let last = Number.NEGATIVE_INFINITY;
  let shown = false;
  return {
    onProgress(file, at, size) {
      const before = read.get(file) ?? 0;
      const upTo = Math.min(at, size);
      if (upTo <= before && read.has(file)) return;
      read.set(file, upTo);
      bytes += upTo - before;
      if (upTo >= size && before < size) finished++;
      const t = now();
      if (t - last < EVERY_MS) return;
      last = t;
      const share = total ? Math.min(1, bytes / total) : 1;
      stream.write(
        `${CLEAR}cacheward: read ${count(finished)} of ${count(files.length)} files, ${mb(bytes)} of ${mb(total)} MB (${(share * 100).toFixed(0)}%)`,
      );
      shown = true;
    },
    done() {
      if (shown) stream.write(CLEAR);
      shown = false;
    },
  };
}
