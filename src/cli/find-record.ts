// Finds one capture record by its id (`cw_…`) in capture files or folders, with its rebuilt bodies.
// For `show` and `diff`: it reads the captures as a stream and stops at the record; it never prints.

import { type ReadRecord, readCaptures } from '../capture/capture-reader.js';
import { defaultCaptureDir } from '../capture/default-dir.js';
import { InputError } from '../core/errors.js';
import { captureInputs } from './capture-inputs.js';

/** What a capture record id looks like (the proxy's ids: `cw_` and base-36 time and hex). */
export const RECORD_ID = /^cw_[0-9a-z]+$/;

/** Where to look: the paths given, else the default capture folder. */
export function recordSearchPaths(dir: string | undefined): string[] {
  return [dir ?? defaultCaptureDir()];
}

/** The record with this id, bodies rebuilt; an InputError naming where it looked when it is not there. */
export async function findRecord(id: string, paths: readonly string[]): Promise<ReadRecord> {
  const files = await captureInputs(paths);
  let records = 0;
  const warnings: string[] = [];
  for await (const r of readCaptures(files, { onWarning: (w) => warnings.push(w) })) {
    records++;
    if (r.record.id !== id) continue;
    const lost = warnings.find((w) => w.includes(`body of ${id} `));
    if (lost) throw new InputError(lost);
    return r;
  }
  throw new InputError(
    `${id}: no such capture record in ${paths.join(', ')} (${records} records in ${files.length} file${files.length === 1 ? '' : 's'}); pass the folder it was captured in with --dir`,
  );
}

/** The bytes of the request a record holds: what went upstream, or (`client`) what the client sent. */
export function recordBody(found: ReadRecord, client: boolean): Buffer {
  const { record } = found;
  if (!record.body)
    throw new InputError(
      `${found.file}:${found.line}: ${record.id} was captured in hashes mode, which keeps no request text; capture with --capture full to keep bodies`,
    );
  const body = client ? (found.clientBody ?? found.body) : found.body;
  if (!body)
    throw new InputError(`${found.file}:${found.line}: the request body of ${record.id} cannot be rebuilt`);
  return body;
}
