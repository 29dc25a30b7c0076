// Reads capture files as a stream, in order, rebuilding full-mode bodies byte-exactly, and hands on the
// markers of exchanges not captured. A torn or invalid line is skipped with a warning naming its file and
// line; memory does not grow with the capture's size. Agent transcripts among the files (told from their
// content) are read by their source adapter instead. A path that does not exist or cannot be read is one
// InputError (CW_INPUT) naming it, never Node's raw error.

import { readdir, stat } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { CachewardError, errorLine, InputError } from '../core/errors.js';
import { fileLines } from '../core/file-lines.js';
import {
  applyBlockDelta,
  type CapturedBlock,
  type CapturedPrefix,
  type CaptureRecord,
} from '../record/capture-record.js';
import type { ReadRecord } from '../record/read-record.js';
import { readTranscript } from '../sources/read-transcript.js';
import { SourceRecords } from '../sources/source-records.js';
import { fileKind, transcriptFiles } from '../sources/transcript-files.js';
import { normalizeAnthropicUsage, normalizeOpenAIUsage } from '../wire/usage.js';
import { BodyReconstructionError, rebuildBody } from './body-delta.js';
import { CAPTURE_FILE } from './capture-writer.js';
import { isNotCaptured, type NotCapturedMarker } from './not-captured.js';

export type { ReadRecord };

export interface ReadCapturesOptions {
  /** Told about every skipped line: `file:line: why`. */
  onWarning?: (message: string) => void;
  /** Rebuild full-mode bodies (default true). */
  bodies?: boolean;
  /** Told how far each file has been read: bytes so far, and the file's size. */
  onProgress?: (file: string, bytes: number, size: number) => void;
  /** Turns the requests of agent transcripts into records (shared by every file of one reading). */
  sources?: SourceRecords;
  /** Told of every marker of exchanges the proxy did not capture (a file may hold several). */
  onNotCaptured?: (marker: NotCapturedMarker, file: string, line: number) => void;
}

/** What to pass instead of a path that holds no captures: every message about such a path ends with it. */
export const CAPTURE_PATHS_HINT =
  'pass the capture-*.jsonl files, or the folder `cacheward proxy --dir` (or `cacheward run --dir`) wrote them to, or agent transcripts (~/.claude/projects, ~/.codex/sessions, one session file)';

/** A path to read that does not exist or cannot be read, as the one-line InputError (CW_INPUT) every reader throws. */
export function unreadablePath(path: string, err: unknown): InputError {
  const why =
    (err as NodeJS.ErrnoException).code === 'ENOENT'
      ? 'no such file or folder'
      : `cannot read: ${errorLine(err)}`;
  return new InputError(`${path}: ${why}; ${CAPTURE_PATHS_HINT}`, { cause: err });
}

/** A system error (errno code) reading `path` becomes its InputError; any other error is thrown as it is. */
function asInputError(path: string): (err: unknown) => never {
  return (err) => {
    if (err instanceof Error && !(err instanceof CachewardError) && (err as NodeJS.ErrnoException).code)
      throw unreadablePath(path, err);
    throw err;
  };
}

/** What a reader of `file` yields; a file that cannot be opened or read is an InputError. */
async function* reading<T>(file: string, from: AsyncGenerator<T>): AsyncGenerator<T> {
  try {
    yield* from;
  } catch (err) {
    asInputError(file)(err);
  }
}

/** Whether a path to read is a folder; a path that does not exist or cannot be read is an InputError. */
export async function isFolder(path: string): Promise<boolean> {
  return (await stat(path).catch(asInputError(path))).isDirectory();
}

/**
 * The files a path names: a file as it is; a folder's `capture-*.jsonl` oldest first, then the agent
 * transcripts below it (Claude Code's, Codex's: see sources/transcript-files). A path that does not exist or
 * cannot be read is an InputError (CW_INPUT).
 */
export async function captureFiles(path: string): Promise<string[]> {
  if (!(await isFolder(path))) return [path];
  const captures = (await readdir(path).catch(asInputError(path)))
    .filter((n) => CAPTURE_FILE.test(n))
    .sort()
    .map((n) => join(path, n));
  return [...captures, ...(await transcriptFiles(path).catch(asInputError(path)))];
}

function isRecord(v: unknown): v is CaptureRecord {
  return (
    v !== null &&
    typeof v === 'object' &&
    (v as { v?: unknown }).v === 1 &&
    typeof (v as { id?: unknown }).id === 'string'
  );
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  v !== null && typeof v === 'object' && !Array.isArray(v);

/**
 * What a capture record lacks of the fields every reader of it relies on, or undefined when it has them
 * (a line cut and joined by hand, another tool's line that begins as ours). Checks the top level only.
 */
function missingField(r: CaptureRecord): string | undefined {
  const x = r as unknown as Record<string, unknown>;
  if (!isObject(x.times) || typeof x.times.start !== 'number' || !Number.isFinite(x.times.start))
    return 'times.start';
  if (!isObject(x.session) || typeof x.session.key !== 'string') return 'session.key';
  if (typeof x.route !== 'string') return 'route';
  for (const k of ['provider', 'method', 'outcome'] as const)
    if (x[k] !== undefined && typeof x[k] !== 'string') return k;
  const fixNote = (f: unknown) => isObject(f) && typeof f.fix === 'string' && Array.isArray(f.notes);
  if (!(Array.isArray(x.fixes) && x.fixes.every(fixNote))) return 'fixes';
  if (x.betas !== undefined && !Array.isArray(x.betas)) return 'betas';
  for (const k of ['model', 'responseId', 'stopReason', 'responseModel'] as const)
    if (x[k] !== undefined && typeof x[k] !== 'string') return k;
  for (const k of ['status', 'requestBytes'] as const)
    if (x[k] !== undefined && typeof x[k] !== 'number') return k;
  for (const k of ['conversation', 'chain'] as const) if (x[k] !== undefined && !isObject(x[k])) return k;
  if (x.headers !== undefined && !isObject(x.headers)) return 'headers';
  if (x.usage !== undefined && !(isObject(x.usage) && isObject(x.usage.raw))) return 'usage.raw';
  if (x.prefix !== undefined) return prefixFault(x.prefix);
  return undefined;
}

const LEVELS: ReadonlySet<unknown> = new Set(['tools', 'system', 'messages']);

/** What a record's prefix lacks (the blocks on disk only: a delta's shared ones were checked in its base). */
function prefixFault(p: unknown): string | undefined {
  if (!isObject(p)) return 'prefix';
  if (typeof p.format !== 'string') return 'prefix.format';
  if (typeof p.totalTokens !== 'number') return 'prefix.totalTokens';
  const params = p.params;
  if (!isObject(params) || ![params.tools, params.system, params.messages].every((v) => isObject(v)))
    return 'prefix.params';
  if (p.folds !== undefined && !isObject(p.folds)) return 'prefix.folds';
  if (p.base !== undefined) {
    const b = p.base;
    if (!isObject(b) || typeof b.id !== 'string' || typeof b.shared !== 'number') return 'prefix.base';
    if (b.moved !== undefined && !Array.isArray(b.moved)) return 'prefix.base.moved';
  }
  for (const k of ['deferredTools', 'unrecorded'] as const)
    if (p[k] !== undefined && !Array.isArray(p[k])) return `prefix.${k}`;
  if (!Array.isArray(p.blocks)) return 'prefix.blocks';
  for (const [i, b] of p.blocks.entries()) {
    const bad =
      !isObject(b) ||
      !LEVELS.has(b.level) ||
      typeof b.hash !== 'string' ||
      typeof b.id !== 'string' ||
      typeof b.kind !== 'string' ||
      typeof b.tokens !== 'number' ||
      typeof b.at !== 'number' ||
      typeof b.size !== 'number' ||
      typeof b.index !== 'number' ||
      (b.cc !== undefined && !isObject(b.cc)) ||
      (b.tp !== undefined && !Array.isArray(b.tp));
    if (bad) return `prefix.blocks[${i}]`;
  }
  return undefined;
}

/** Reads every record of the given files or folders, in order. */
export async function* readCaptures(
  paths: readonly string[],
  options: ReadCapturesOptions = {},
): AsyncGenerator<ReadRecord> {
  const warn = options.onWarning ?? (() => {});
  const sources = options.sources ?? new SourceRecords();
  for (const path of paths) {
    for (const file of await captureFiles(path)) {
      const kind = CAPTURE_FILE.test(basename(file))
        ? 'capture'
        : await fileKind(file).catch(asInputError(file));
      if (kind === 'claude-code' || kind === 'codex') {
        yield* reading(file, readTranscript(file, kind, options, sources));
        continue;
      }
      const size = (await stat(file).catch(asInputError(file))).size;
      // Delta bases live in the same file: keep only each session's latest body.
      const bodies = new Map<string, Buffer>();
      const latestOf = new Map<string, string>();
      const blocksOf = new Map<
        string,
        { id: string; blocks: CapturedBlock[]; params: CapturedPrefix['params'] }
      >();
      const headersOf = new Map<string, Record<string, string>>();
      let n = 0;
      for await (const { lines, ends } of reading(file, fileLines(file)))
        for (let i = 0; i < lines.length; i++) {
          const text = lines[i] as string;
          n++;
          if (n % 1000 === 0) options.onProgress?.(file, ends[i] as number, size);
          if (text.trim() === '') continue;
          let value: unknown;
          try {
            value = JSON.parse(text);
          } catch {
            warn(`${file}:${n}: skipped a torn or invalid line (${text.length} characters, not JSON)`);
            continue;
          }
          if (isNotCaptured(value)) {
            options.onNotCaptured?.(value, file, n);
            continue;
          }
          if (!isRecord(value)) {
            warn(`${file}:${n}: skipped a line that is not a cacheward capture record`);
            continue;
          }
          const missing = missingField(value);
          if (missing) {
            warn(`${file}:${n}: skipped a capture record without a valid ${missing} (${value.id})`);
            continue;
          }
          if (value.headers && value.headers['='] === 'previous')
            value.headers = headersOf.get(value.session.key) ?? {};
          headersOf.set(value.session.key, value.headers ?? {});
          if (value.usage && !value.usage.normalized) {
            const n =
              value.provider === 'anthropic'
                ? normalizeAnthropicUsage(value.usage.raw)
                : normalizeOpenAIUsage(value.usage.raw);
            if (n) value.usage.normalized = n;
          }
          const prefix = value.prefix;
          if (prefix) {
            const session = value.session.key;
            if (prefix.base) {
              const prev = blocksOf.get(session);
              if (!prev || prev.id !== prefix.base.id) {
                warn(
                  `${file}:${n}: the prefix of ${value.id} refers to ${prefix.base.id}, which is not in this file; its blocks are incomplete`,
                );
              } else {
                const { blocks, movedOk } = applyBlockDelta(prev.blocks, prefix.base, prefix.blocks);
                if (!movedOk)
                  warn(
                    `${file}:${n}: the moved blocks of ${value.id} are not [first, count, delta] runs; their offsets are the base's`,
                  );
                prefix.blocks = blocks;
                if (prefix.params?.tools?.['='] === 'base') prefix.params = prev.params;
                delete prefix.base;
              }
            }
            if (!prefix.base)
              blocksOf.set(session, { id: value.id, blocks: prefix.blocks, params: prefix.params });
          }
          const out: ReadRecord = { record: value, file, line: n };
          if (options.bodies !== false && value.body) {
            try {
              out.body = rebuildBody(value.body, (id) => bodies.get(id));
              if (value.clientBody)
                out.clientBody = rebuildBody(value.clientBody, (id) =>
                  id === value.id ? out.body : bodies.get(id),
                );
              const session = value.session.key;
              const previous = latestOf.get(session);
              if (previous) bodies.delete(previous);
              bodies.set(value.id, out.body);
              latestOf.set(session, value.id);
            } catch (err) {
              if (!(err instanceof BodyReconstructionError)) throw err;
              warn(`${file}:${n}: the request body of ${value.id} cannot be rebuilt: ${err.message}`);
            }
          }
          yield out;
        }
      options.onProgress?.(file, size, size);
    }
  }
}
