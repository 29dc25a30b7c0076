// Writes a file the CLI makes (report --html) whole or not at all: a temp file beside it, then a rename.
// It never leaves a cut-off file, nor its temp file, nor touches the file there before when a write fails.

import { randomBytes } from 'node:crypto';
import { chmod, realpath, rename, rm, stat, writeFile } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { writeErrorLine } from '../core/errors.js';

/**
 * Replaces `file` with `text`. On failure (a full disk) the temp file is removed, `file` is as it was, and
 * the error thrown says why in one line (ENOSPC as "the disk is full"). A symlink is written through (the
 * file it names is replaced), and what is not a regular file (`/dev/stdout`, a pipe) is written directly.
 */
export async function replaceFileWhole(file: string, text: string): Promise<void> {
  const target = await realpath(file).catch(() => file);
  const before = await stat(target).catch(() => undefined);
  if (before && !before.isFile()) {
    await writeFile(target, text).catch((err: unknown) => {
      throw new Error(writeErrorLine(err));
    });
    return;
  }
  const tmp = join(
    dirname(target),
    `.${basename(target)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`,
  );
  try {
    await writeFile(tmp, text, { flag: 'wx' });
    // The mode of the file it replaces (a report shared with the group stays so).
    if (before) await chmod(tmp, before.mode & 0o777);
    await rename(tmp, target);
  } catch (err) {
    await rm(tmp, { force: true }).catch(() => {});
    throw new Error(writeErrorLine(err));
  }
}
