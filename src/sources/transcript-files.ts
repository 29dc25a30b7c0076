// Finds the agent transcripts below a folder and reads the head of any file to tell what it is and when it
// starts. A shell (file reads only); it never reads more than a file's first 64 KB and never writes.

import { open, readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { mapBounded } from '../core/map-bounded.js';
import { firstTimestamp, type SourceKind, sourceKind } from './transcript-kind.js';

/** How much of a file's start is read to tell its kind and first time. */
const HEAD_BYTES = 64 * 1024;
/** Heads read at once when a folder is walked (each holds a {@link HEAD_BYTES} buffer while it is read). */
const HEADS_AT_ONCE = 16;
/** How deep below a folder transcripts are looked for (`~/.codex/sessions/YYYY/MM/DD/…`, a subagent's file). */
export const TRANSCRIPT_DEPTH = 6;
/** A cacheward capture file's name (the capture writer's). */
const CAPTURE_NAME = /^capture-.*\.jsonl$/;

/** Whether a file's name allows it to be a transcript (a JSON-lines file that is not a capture file). */
export function mayBeTranscript(name: string): boolean {
  return name.endsWith('.jsonl') && !CAPTURE_NAME.test(name);
}

/** The first bytes of a file as text (less when the file is shorter). */
export async function fileHead(file: string, bytes = HEAD_BYTES): Promise<string> {
  const handle = await open(file, 'r');
  try {
    const buf = Buffer.alloc(bytes);
    const { bytesRead } = await handle.read(buf, 0, bytes, 0);
    return buf.toString('utf8', 0, bytesRead);
  } finally {
    await handle.close();
  }
}

/** What a file's head says: its kind and its first recorded time. */
interface HeadInfo {
  kind: SourceKind | undefined;
  start: number | undefined;
}

/**
 * Heads read, by path, size and modification time: a report asks a file's kind when it walks a folder, when
 * it merges by time and when it reads, and each read of a head is three trips to the file system.
 */
const heads = new Map<string, HeadInfo>();

async function headInfo(file: string): Promise<HeadInfo> {
  const s = await stat(file);
  const key = `${file}\n${s.size}\n${s.mtimeMs}`;
  const known = heads.get(key);
  if (known) return known;
  const head = await fileHead(file);
  const info = { kind: sourceKind(head), start: firstTimestamp(head) };
  if (heads.size >= 100_000) heads.clear();
  heads.set(key, info);
  return info;
}

/** What a file is, from its head: a capture, a Claude Code transcript, a Codex rollout, or none of them. */
export async function fileKind(file: string): Promise<SourceKind | undefined> {
  return (await headInfo(file)).kind;
}

/** When a transcript starts (its first recorded time), for merging sources by time; undefined if it says none. */
export async function transcriptStart(file: string): Promise<number | undefined> {
  return (await headInfo(file)).start;
}

/**
 * The agent transcripts below `dir` (any depth up to {@link TRANSCRIPT_DEPTH}): every `*.jsonl` that is not a capture
 * file and whose head is a Claude Code transcript or a Codex rollout, in path order. Folders that cannot be
 * read are passed over.
 */
export async function transcriptFiles(dir: string): Promise<string[]> {
  const paths = await namedLikeTranscripts(dir);
  const kinds = await mapBounded(paths, HEADS_AT_ONCE, (path) => fileKind(path).catch(() => undefined));
  return paths.filter((_, i) => kinds[i] === 'claude-code' || kinds[i] === 'codex');
}

/**
 * The files below `dir` (itself `depth` below where the walk began) whose names may be transcripts, up to
 * {@link TRANSCRIPT_DEPTH}, in path order; `onFolder` is told of every folder read on the way. Folders that
 * cannot be read are passed over.
 */
export async function namedLikeTranscripts(
  dir: string,
  depth = 0,
  onFolder?: (folder: string, depth: number) => void,
): Promise<string[]> {
  const out: string[] = [];
  const walk = async (folder: string, d: number): Promise<void> => {
    let entries: import('node:fs').Dirent[];
    try {
      entries = await readdir(folder, { withFileTypes: true });
    } catch {
      return;
    }
    onFolder?.(folder, d);
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const e of entries) {
      const path = join(folder, e.name);
      if (e.isDirectory()) {
        if (d < TRANSCRIPT_DEPTH && e.name !== 'node_modules') await walk(path, d + 1);
      } else if (e.isFile() && mayBeTranscript(e.name)) out.push(path);
    }
  };
  await walk(dir, depth);
  return out;
}
