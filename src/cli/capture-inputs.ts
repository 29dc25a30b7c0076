// Turns the PATH arguments of report, whatif, replay and show into capture files and agent transcripts: each
// file once (a folder and a file in it are read once), and anything that is neither named in one line with what
// to pass. It never writes, and never hands on a file it could not tell is a capture or a transcript.

import { readdir, realpath } from 'node:fs/promises';
import { CAPTURE_PATHS_HINT, captureFiles, isFolder, readCaptures } from '../capture/capture-reader.js';
import { InputError } from '../core/errors.js';
import { fileKind } from '../sources/transcript-files.js';

/** The capture files the paths name, in order, each once. Throws an InputError for anything else. */
export async function captureInputs(paths: readonly string[]): Promise<string[]> {
  const seen = new Set<string>();
  const out: string[] = [];
  for (const path of paths) {
    const isDir = await isFolder(path);
    const files = isDir ? await captureFiles(path) : [path];
    if (isDir && !files.length) throw new InputError(await describeFolder(path));
    for (const file of files) {
      const real = await realpath(file);
      if (seen.has(real)) continue;
      seen.add(real);
      if (!isDir) await checkCaptureFile(file);
      out.push(file);
    }
  }
  return out;
}

async function describeFolder(path: string): Promise<string> {
  const entries = await readdir(path);
  if (!entries.length) return `${path}: an empty folder, no capture files; ${CAPTURE_PATHS_HINT}`;
  const shown = entries.slice(0, 3).join(', ');
  return `${path}: no capture files (capture-*.jsonl) in this folder, only ${entries.length} other entr${entries.length === 1 ? 'y' : 'ies'} (${shown}${entries.length > 3 ? ', …' : ''}), and no agent transcripts below it; ${CAPTURE_PATHS_HINT}`;
}

class NotACapture extends Error {
  constructor(readonly line: number) {
    super(`line ${line}`);
  }
}

/** A capture file begins with a capture record: records are appended whole, so only a last line can be torn. */
async function checkCaptureFile(file: string): Promise<void> {
  // An agent transcript is one from its first lines, whether or not it holds a request yet.
  const kind = await fileKind(file).catch(() => undefined);
  if (kind === 'claude-code' || kind === 'codex') return;
  // Its head begins as a capture record does: a line of it that does not parse is torn, not another format.
  const capture = kind === 'capture';
  let marker = false;
  let torn = false;
  try {
    for await (const _ of readCaptures([file], {
      bodies: false,
      // A file whose records were all lost still says so: it is a capture.
      onNotCaptured: () => {
        marker = true;
      },
      onWarning: (w) => {
        // Only a skipped line disqualifies the file; other warnings concern a record that was read.
        if (!w.includes(': skipped ')) return;
        if (capture) {
          torn = true;
          return;
        }
        throw new NotACapture(Number.parseInt(w.slice(file.length + 1), 10) || 1);
      },
    })) {
      return;
    }
  } catch (err) {
    if (!(err instanceof NotACapture)) throw err;
    throw new InputError(
      `${file}:${err.line}: not a capture file: this line is not a cacheward capture record; ${CAPTURE_PATHS_HINT}`,
    );
  }
  if (marker) return;
  if (torn)
    throw new InputError(
      `${file}: a capture file with no whole record: its lines end before their records do (cut off while it was written, or copied part-way?)`,
    );
  throw new InputError(`${file}: an empty file, not a capture; ${CAPTURE_PATHS_HINT}`);
}
