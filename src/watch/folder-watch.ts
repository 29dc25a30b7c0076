// Finds the files below the folders `cacheward watch` follows that may be transcripts, as they appear: a walk
// now and then, and the operating system's word (fs.watch) on every folder walked, in between. A shell: it
// lists and watches folders; it never reads or writes a file.

import { type FSWatcher, watch } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { namedLikeTranscripts } from '../sources/transcript-files.js';

export interface FolderWatchOptions {
  /** Something changed in a watched folder: a look soon would find it. */
  wake: () => void;
  /** Said once, when the system allows no more watches (folders past it are found by the walks alone). */
  warn: (line: string) => void;
  /** Folders watched at most (default 8,192, Linux's smallest default inotify limit). */
  maxWatchers?: number;
}

export class FolderWatch {
  private readonly watchers = new Map<string, FSWatcher>();
  /** Each folder walked, and how deep it is below the folder it was found from. */
  private readonly depths = new Map<string, number>();
  private changed = new Set<string>();
  private noMoreWatchers = false;
  private closed = false;

  constructor(private readonly o: FolderWatchOptions) {}

  /** The folders watched now. */
  get watching(): number {
    return this.watchers.size;
  }

  /**
   * The files below `folder` (itself `depth` below where it was found) whose names may be transcripts, up to
   * the report's depth; every folder on the way is watched. `walked` collects the folders seen.
   */
  walk(folder: string, depth = 0, walked?: Set<string>): Promise<string[]> {
    return namedLikeTranscripts(folder, depth, (dir, d) => {
      walked?.add(dir);
      this.depths.set(dir, d);
      this.watchFolder(dir);
    });
  }

  /** How deep a path is below the folder it was found from, when its folder was walked. */
  depthOf(path: string): number | undefined {
    const parent = this.depths.get(dirname(path));
    return parent === undefined ? undefined : parent + 1;
  }

  /** Paths the system said changed since the last call, each once. */
  takeChanged(): string[] {
    const out = [...this.changed];
    this.changed = new Set();
    return out;
  }

  /** Stops watching the folders not walked in the latest full walk (they are gone or out of reach). */
  prune(walked: ReadonlySet<string>): void {
    for (const dir of [...this.depths.keys()])
      if (!walked.has(dir)) {
        this.depths.delete(dir);
        this.unwatch(dir);
      }
  }

  close(): void {
    this.closed = true;
    for (const dir of [...this.watchers.keys()]) this.unwatch(dir);
  }

  private watchFolder(dir: string): void {
    if (this.closed || this.noMoreWatchers || this.watchers.has(dir)) return;
    if (this.watchers.size >= (this.o.maxWatchers ?? 8_192)) {
      this.tooMany(`${this.watchers.size} folders are watched already (the most it watches)`);
      return;
    }
    try {
      const w = watch(dir, { persistent: false }, (_event, name) => {
        this.changed.add(name ? join(dir, name.toString()) : dir);
        this.o.wake();
      });
      w.on('error', () => this.unwatch(dir));
      this.watchers.set(dir, w);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOSPC' || code === 'EMFILE')
        this.tooMany(`the system allows no more file watches (${code}, at ${basename(dir)})`);
    }
  }

  private tooMany(why: string): void {
    if (this.noMoreWatchers) return;
    this.noMoreWatchers = true;
    this.o.warn(`${why}: the folders past it are looked at by the periodic walk only`);
  }

  private unwatch(dir: string): void {
    const w = this.watchers.get(dir);
    if (!w) return;
    this.watchers.delete(dir);
    w.close();
  }
}
