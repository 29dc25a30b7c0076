// Writes a file the CLI makes (report --html) whole or not at all: a temp file beside it, then a rename.
// It never leaves a cut-off file, nor its temp file, nor touches the file there before when a write fails.

import { randomBytes } from 'node:crypto';
import { chmod, rename, rm, stat, writeFile } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';

/**
 * Replaces `file` with `text`. On failure (a full disk) the temp file is removed, `file` is as it was, and
 * the error thrown says why in one line (ENOSPC as "the disk is full").
 */
export async function replaceFileWhole(file: string, text: string): Promise<void> {
  const tmp = join(dirname(file), `.${basename(file)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
  try {
    await writeFile(tmp, text, { flag: 'wx' });
    // The mode of the file it replaces (a report shared with the group stays so).
    const before = await stat(file).catch(() => undefined);
    if (before?.isFile()) await chmod(tmp, before.mode & 0o777);
    await rename(tmp, file);
  } catch (err) {
    await rm(tmp, { force: true }).catch(() => {});
    const code = (err as NodeJS.ErrnoException).code;
    const why = (err as Error).message;
    throw new Error(code === 'ENOSPC' || code === 'EDQUOT' ? `the disk is full (${why})` : why);
  }
}
