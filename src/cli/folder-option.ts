// Refuses, before anything starts, a folder option (--dir, --ca-dir, --write, --captures) that names a file or
// lies below one: one line naming the file. It only looks (stat); it never creates, changes or removes anything.

import { statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { InputError } from '../core/errors.js';

/**
 * The file in the way of `dir` being a folder: `dir` itself or the nearest of its parents that exists, when
 * that is not a folder; undefined when `dir` is a folder or can still be created below one (or when the
 * nearest existing one cannot be looked at: making the folder then says why, at run time).
 */
function fileInTheWay(dir: string): string | undefined {
  for (let d = resolve(dir); ; d = dirname(d)) {
    let isDir: boolean;
    try {
      isDir = statSync(d).isDirectory();
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      // Missing (or below a file: ENOTDIR, told when the walk reaches that file): look one level up.
      if ((code === 'ENOENT' || code === 'ENOTDIR') && dirname(d) !== d) continue;
      return undefined;
    }
    return isDir ? undefined : d;
  }
}

/**
 * Throws an InputError when `dir`, given as `flag` (or a default named so), names a file or a folder below a
 * file; `fix` says what to do instead.
 */
export function refuseFileAsFolder(
  flag: string,
  dir: string,
  fix = 'pass a folder (it is created if missing)',
): void {
  const file = fileInTheWay(dir);
  if (file === undefined) return;
  const where = file === resolve(dir) ? 'a file is there' : `${file} is a file`;
  throw new InputError(`${flag} ${dir}: ${where}, not a folder; ${fix}`);
}
