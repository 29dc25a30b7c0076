// `cacheward watch`'s reading side: the transcripts below the given paths followed as the agents write them,
// their calls rebuilt by the report's own adapters and records, handed on merged by start time, each call
// once. A shell (files, folders and timers) that never writes; what it keeps is bounded (files, ids, lines).

import { stat } from 'node:fs/promises';
import { basename } from 'node:path';
import { isTurn } from '../analyze/analyze-captures.js';
import { LruMap } from '../core/lru-map.js';
import type { CaptureRecord } from '../record/capture-record.js';
import { SourceRecords } from '../sources/source-records.js';
import { transcriptAdapter } from '../sources/transcript-adapter.js';
import { fileKind, mayBeTranscript, transcriptStart } from '../sources/transcript-files.js';
import { TranscriptLines } from '../sources/transcript-lines.js';
import { FolderWatch } from './folder-watch.js';
import { CHUNK, FollowedFile, type RestartReason } from './followed-file.js';

/** A file quiet this long after a response that says how it stopped hands that response on. */
const QUICK_SETTLE_MS = 1_000;
/** Call ids remembered, so a file read again from its start counts no call twice (the report's window). */
const SEEN_IDS = 200_000;
/** Warnings remembered, so a file read again does not repeat them. */
const WARNED = 10_000;
/**
 * Files followed at once (each holds its session's adapter); past it, those done for now are let go, the least
 * lately grown first, however recent (one with a response still to settle is read again when it would settle).
 */
const MAX_FILES = 200;
/** How long a ready call waits for an earlier-started call of another file to be answered. */
const HOLD_MS = 10_000;

export interface TranscriptWatchOptions {
  /** Folders or files; one that does not exist yet is waited for. */
  paths: readonly string[];
  /**
   * Calls that started at or after this time (ms since the epoch) are shown; earlier ones in the same files are
   * read for context (their conversations and cache entries). Files last changed before it are not read until
   * they change.
   */
  cutoff: number;
  /** How long a file must stop growing before its half-written last line is read as it is. */
  settleMs: number;
  /** How often followed files are looked at (default 500 ms; the folders' own events come sooner). */
  pollMs?: number;
  /** How often every folder is walked again, for what the events missed (default 30 s). */
  rescanMs?: number;
  /** A file quiet this long is let go, and read again from its start if it changes (default an hour). */
  releaseMs?: number;
  /**
   * Files followed at once (default 200): past it, those read to their end with no call waiting in them are let
   * go, however recently they grew.
   */
  maxFiles?: number;
  now?: () => number;
  /**
   * Every call, once, in start order: `shown` when it started at or after the cutoff. A file's earlier calls
   * come again (not shown) before its next one when the analysis forgot them (see `remembers`).
   */
  onRecord: (record: CaptureRecord, shown: boolean) => void | Promise<void>;
  /**
   * Whether the analysis still holds a call handed on (its conversation model does). Before a file's next
   * call, the latest call of that file it took in is asked about: once forgotten (a session idle for longer
   * than its provider's cache lives, while others went on), the file's earlier calls it no longer holds are
   * handed on again as context, from the file's start, as the report would have them. Without it, never.
   */
  remembers?: (id: string) => boolean;
  /** A transcript's own warning (`file:line: message`), each once. */
  warn: (line: string) => void;
  /** What the watch is doing: a path waited for or found, a file read again. */
  say: (line: string) => void;
}

/** What `/_cacheward/health` says of the reading side. */
export interface TranscriptWatchStatus {
  /** The files already there at start have been read. */
  ready: boolean;
  /** Files followed now (at most the bound; the others are taken up again when they change). */
  files: number;
  /**
   * Files read from their start since the watch began (a file let go and taken up again counts again, as does
   * one let go before it settled, read again to settle).
   */
  read: number;
  /** Followed files whose last line is not ended yet (waited for up to the settle time). */
  partialLines: number;
  folders: number;
  waiting: string[];
  /**
   * `held`: calls read and waiting for an earlier-started call of another file to be answered; `recalled`:
   * earlier calls handed on again as context, for a file whose history the analysis had forgotten.
   */
  calls: { shown: number; context: number; duplicates: number; held: number; recalled: number };
  restarts: number;
  warnings: number;
}

type Kind = 'claude-code' | 'codex';

interface Passed {
  key: string;
  previous?: string;
  /** Let go before it settled: its last call's start (the merge's place for it) and when to settle it. */
  settle?: { at: number; nextStart: number };
}

export class TranscriptWatch {
  private readonly files = new Map<string, FollowedFile>();
  /**
   * Files looked at and not followed, by how they were (followed again only once that changes), and for a
   * file let go, the latest call of it the analysis took in (and, let go before it settled, when to settle it).
   */
  private readonly passed = new Map<string, Passed>();
  /**
   * Files let go (past the bound) with something still to settle (a response or a line still open), by when a
   * look would settle it: unchanged by then, each is read again from its start and settled.
   */
  private readonly toSettle = new Map<string, number>();
  private readonly seen = new LruMap<true>(SEEN_IDS);
  private readonly warned = new LruMap<true>(WARNED);
  private readonly sources = new SourceRecords();
  private readonly folders: FolderWatch;
  private readonly waiting = new Set<string>();
  private readonly rootFiles = new Set<string>();
  private readonly counts = {
    shown: 0,
    context: 0,
    duplicates: 0,
    recalled: 0,
    read: 0,
    restarts: 0,
    warnings: 0,
  };
  private readonly now: () => number;
  /** Where every read goes (one read is under way at a time). */
  private readonly scratch = Buffer.allocUnsafe(CHUNK);
  private lastWalk = Number.NEGATIVE_INFINITY;
  /** The call held back for an earlier one still waiting in another file, and since when. */
  private held: { id: string; since: number } | undefined;
  /** Files a look left unread because of a hold. */
  private readonly carried = new Set<FollowedFile>();
  /** Calls left waiting by the latest look because of a hold. */
  private heldCalls = 0;
  private ready = false;
  private closed = false;
  private dirty = false;
  private napTimer: NodeJS.Timeout | undefined;
  private napEnd: (() => void) | undefined;
  private looping: Promise<void> | undefined;

  constructor(private readonly o: TranscriptWatchOptions) {
    this.now = o.now ?? Date.now;
    this.folders = new FolderWatch({ wake: () => this.wake(), warn: (l) => o.say(l) });
  }

  /** Reads what is there (the files changed since the cutoff), then follows; resolves once that first read is done. */
  async start(): Promise<void> {
    for (const root of this.o.paths) {
      const s = await stat(root).catch(() => undefined);
      if (!s) {
        this.waiting.add(root);
        this.o.say(`waiting for ${root}: it does not exist yet`);
      } else if (!s.isDirectory()) this.rootFiles.add(root);
    }
    await this.tick();
    this.ready = true;
    this.looping = this.loop();
  }

  async close(): Promise<void> {
    this.closed = true;
    this.folders.close();
    this.napEnd?.();
    await this.looping;
  }

  status(): TranscriptWatchStatus {
    return {
      ready: this.ready,
      files: this.files.size,
      read: this.counts.read,
      partialLines: [...this.files.values()].filter((f) => f.lines.partial).length,
      folders: this.folders.watching,
      waiting: [...this.waiting],
      calls: {
        shown: this.counts.shown,
        context: this.counts.context,
        duplicates: this.counts.duplicates,
        held: this.heldCalls,
        recalled: this.counts.recalled,
      },
      restarts: this.counts.restarts,
      warnings: this.counts.warnings,
    };
  }

  private async loop(): Promise<void> {
    while (!this.closed) {
      await this.nap(this.dirty ? 25 : (this.o.pollMs ?? 500));
      if (this.closed) return;
      this.dirty = false;
      try {
        await this.tick();
      } catch (err) {
        this.o.say(`a look at the transcripts failed (following goes on): ${(err as Error).message}`);
      }
    }
  }

  /** Waits `ms`, or less when a folder says something changed. */
  private nap(ms: number): Promise<void> {
    return new Promise((resolve) => {
      this.napEnd = () => {
        clearTimeout(this.napTimer);
        this.napEnd = undefined;
        resolve();
      };
      this.napTimer = setTimeout(this.napEnd, ms);
    });
  }

  private wake(): void {
    if (this.dirty) return;
    this.dirty = true;
    // Writes come in bursts (a response's lines): a short wait takes them in one look.
    if (this.napEnd) {
      clearTimeout(this.napTimer);
      this.napTimer = setTimeout(this.napEnd, 25);
    }
  }

  /**
   * One look: paths waited for, folders (walked now and then), what changed, then the followed files that
   * are being written, were named by an event, or (at a walk) all of them.
   */
  private async tick(): Promise<void> {
    const now = this.now();
    for (const root of [...this.waiting]) {
      if (!(await stat(root).catch(() => undefined))) continue;
      this.waiting.delete(root);
      this.o.say(`${root} appeared: following it`);
      this.lastWalk = Number.NEGATIVE_INFINITY;
    }
    const due = new Set<FollowedFile>();
    const walk = now - this.lastWalk >= (this.o.rescanMs ?? 30_000);
    if (walk) {
      this.lastWalk = now;
      const walked = new Set<string>();
      for (const root of this.o.paths) {
        if (this.waiting.has(root)) continue;
        const s = await stat(root).catch(() => undefined);
        if (s?.isDirectory())
          for (const f of await this.folders.walk(root, 0, walked)) await this.consider(f, due);
        else if (s) this.rootFiles.add(root);
      }
      this.folders.prune(walked);
    }
    for (const path of this.folders.takeChanged()) await this.consider(path, due);
    for (const path of this.rootFiles) await this.consider(path, due);
    for (const [path, at] of [...this.toSettle])
      if (at <= now) {
        this.toSettle.delete(path);
        await this.consider(path, due);
      }
    for (const f of this.files.values()) if (walk || this.active(f, now) || this.carried.has(f)) due.add(f);
    this.carried.clear();
    const list = [...due];
    due.clear();
    await this.drain(list, now);
    this.release(now);
  }

  /** Whether a followed file is looked at on every look: written lately, or with something still to settle. */
  private active(f: FollowedFile, now: number): boolean {
    return (
      f.queue.length > 0 ||
      f.lines.partial ||
      now - f.lastGrowth <= this.o.settleMs + (this.o.pollMs ?? 500) * 2
    );
  }

  /** A path that may be new or changed: a folder is walked, a transcript changed since the cutoff followed. */
  private async consider(path: string, due: Set<FollowedFile>): Promise<void> {
    const followed = this.files.get(path);
    if (followed) {
      due.add(followed);
      return;
    }
    const s = await stat(path).catch(() => undefined);
    if (!s) return;
    if (s.isDirectory()) {
      const depth = this.folders.depthOf(path);
      if (depth !== undefined)
        for (const f of await this.folders.walk(path, depth)) await this.consider(f, due);
      return;
    }
    if (!s.isFile() || (!this.rootFiles.has(path) && !mayBeTranscript(basename(path)))) return;
    if (s.mtimeMs < this.o.cutoff) return;
    const key = `${s.mtimeMs}:${s.size}:${s.ino}`;
    const before = this.passed.get(path);
    // Unchanged: taken up again only to settle what it left open when it was let go.
    const settling = before?.key === key && before.settle !== undefined && before.settle.at <= this.now();
    if (before?.key === key && !settling) return;
    const kind = await fileKind(path).catch(() => undefined);
    // A file whose first lines do not tell yet is looked at again when it changes.
    if (kind !== 'claude-code' && kind !== 'codex') {
      this.passed.set(path, { key });
      return;
    }
    this.passed.delete(path);
    this.toSettle.delete(path);
    const first = await transcriptStart(path).catch(() => undefined);
    const f = this.follow(path, kind, s.mtimeMs, first ?? Number.NEGATIVE_INFINITY);
    // Taken up again: its calls counted already are passed over, and its history is asked about at the next.
    f.previous = before?.previous;
    // Unchanged, its calls up to the one it left open were handed on: the merge reads it once it gets there
    // (not from its first call, holding its whole session meanwhile).
    if (settling && before?.settle) f.nextStart = Math.max(f.nextStart, before.settle.nextStart);
    due.add(f);
  }

  private follow(path: string, kind: Kind, lastGrowth: number, first: number): FollowedFile {
    const warn = (line: number, message: string) => {
      const text = `${path}:${line}: ${message}`;
      if (this.warned.get(text)) return;
      this.warned.set(text, true);
      this.counts.warnings++;
      this.o.warn(text);
    };
    const lines = () => new TranscriptLines(transcriptAdapter(path, kind, warn), warn);
    const onRestart = (reason: RestartReason) => {
      this.counts.restarts++;
      this.o.say(
        `${path} was ${reason === 'replaced' ? 'replaced' : reason === 'truncated' ? 'truncated' : 'rewritten'}: read again from its start (calls already counted are not counted again)`,
      );
    };
    const f = new FollowedFile({ path, lines, lastGrowth, onRestart });
    f.nextStart = first;
    this.files.set(path, f);
    this.counts.read++;
    return f;
  }

  /**
   * Reads the files on and hands on their calls merged by start time, as the report merges: a file is read
   * once the merge reaches the time its next call can start at (so only files whose calls overlap in time
   * are open at once), and let go when it is done and more files are followed than the bound.
   */
  private async drain(due: FollowedFile[], now: number): Promise<void> {
    // Each entry is dropped once read: a file let go takes its session's state with it at once.
    const waiting: Array<FollowedFile | undefined> = due.sort((a, b) => a.nextStart - b.nextStart);
    // Those not read yet by this look (none of them is let go before it is read).
    const unread = new Set(due);
    const heads: FollowedFile[] = [];
    const earliest = (): FollowedFile | undefined => {
      let best: FollowedFile | undefined;
      for (const f of heads)
        if (!best || (f.queue[0] as CaptureRecord).times.start < (best.queue[0] as CaptureRecord).times.start)
          best = f;
      return best;
    };
    let next = 0;
    for (;;) {
      for (let f = waiting[next]; f && !this.closed; f = waiting[next]) {
        const head = earliest();
        if (head && f.nextStart > (head.queue[0] as CaptureRecord).times.start) break;
        waiting[next++] = undefined;
        unread.delete(f);
        await this.fill(f, now);
        if (f.queue.length) heads.push(f);
        else this.letGoIfOver(now, unread);
      }
      const best = earliest();
      if (!best || this.closed) {
        this.heldCalls = 0;
        return;
      }
      if (this.holds(best, now)) {
        this.heldCalls = heads.reduce((n, f) => n + f.queue.length, 0);
        // The files not read yet are read at the next look, whatever wakes it.
        for (const f of waiting.slice(next)) if (f) this.carried.add(f);
        return;
      }
      const record = best.queue.shift() as CaptureRecord;
      if (Number.isFinite(record.times.start)) best.nextStart = record.times.start;
      const shown = record.times.start >= this.o.cutoff;
      await this.recall(best, record, now);
      if (shown) this.counts.shown++;
      else this.counts.context++;
      await this.o.onRecord(record, shown);
      if (this.o.remembers?.(record.id)) best.previous = record.id;
      if (best.queue.length) continue;
      await this.fill(best, now);
      if (best.queue.length) continue;
      heads.splice(heads.indexOf(best), 1);
      this.letGoIfOver(now, unread);
    }
  }

  /**
   * Whether the next call (the earliest-started of those ready) waits: another file, still being written, has a
   * call that started before it (or with it) and has no response yet. The report orders calls by start; this keeps that
   * order when calls of two files overlap (a subagent beside its main line), for at most {@link HOLD_MS}.
   */
  private holds(next: FollowedFile, now: number): boolean {
    const head = next.queue[0] as CaptureRecord;
    let earlier = false;
    for (const f of this.files.values()) {
      if (f === next || now - f.lastGrowth >= this.o.settleMs) continue;
      const since = f.lines.waitingSince();
      if (since !== undefined && since <= head.times.start) earlier = true;
    }
    if (!earlier) {
      this.held = undefined;
      return false;
    }
    if (this.held?.id !== head.id) this.held = { id: head.id, since: now };
    const { since } = this.held;
    return now - since < HOLD_MS;
  }

  /** Reads a file on until a call is ready or nothing more is written; at its end, settles what waited long enough. */
  private async fill(f: FollowedFile, now: number): Promise<void> {
    while (!f.queue.length && !this.closed) {
      const look = await f.read(now, this.scratch).catch(() => 'gone' as const);
      if (look === 'gone') {
        this.files.delete(f.path);
        return;
      }
      this.take(f);
      if (!f.atEnd) continue;
      const quiet = now - f.lastGrowth;
      if (!f.queue.length && quiet >= Math.min(QUICK_SETTLE_MS, this.o.settleMs)) {
        f.lines.settle(quiet >= this.o.settleMs);
        this.take(f);
      }
      return;
    }
  }

  /** The file's new requests as records, each call once (a file read again from its start repeats its calls). */
  private take(f: FollowedFile): void {
    if (!f.lines.ready) return;
    for (const req of f.lines.take()) {
      if (this.seen.get(req.id)) {
        this.counts.duplicates++;
        continue;
      }
      this.seen.set(req.id, true);
      f.queue.push(this.sources.record(req));
    }
  }

  /**
   * Before a file's next call: when the analysis no longer holds the latest call of that file it took in, the
   * file's earlier calls it does not hold are handed on again as context, in the file's order (read from its
   * start by a new adapter, up to that next call), so the call is related to its history as in the report.
   * Only the file that grew is read again, once for each time its history was forgotten.
   */
  private async recall(f: FollowedFile, next: CaptureRecord, now: number): Promise<void> {
    const remembers = this.o.remembers;
    const previous = f.previous;
    if (!remembers || previous === undefined || remembers(previous)) return;
    f.previous = undefined;
    const reader = f.fromStart();
    while (!this.closed) {
      const look = await reader.read(now, this.scratch).catch(() => 'gone' as const);
      if (look === 'gone') return;
      for (const req of reader.lines.ready ? reader.lines.take() : []) {
        if (req.id === next.id) return;
        if (remembers(req.id)) continue;
        const earlier = this.sources.record(req);
        // A call that is no turn (refused, count_tokens) was never held: it was handed on once already.
        if (!isTurn(earlier)) continue;
        this.counts.recalled++;
        await this.o.onRecord(earlier, false);
      }
      if (reader.atEnd) return;
    }
  }

  /**
   * When more files are followed than the bound (a file just read being done), lets go of the least lately
   * grown of those done and read by this look, however recently it grew (it is read again if it changes, or
   * to settle): what is held stays at the bound even when every file was just written.
   */
  private letGoIfOver(now: number, unread: ReadonlySet<FollowedFile>): void {
    if (this.files.size <= (this.o.maxFiles ?? MAX_FILES)) return;
    let oldest: FollowedFile | undefined;
    for (const f of this.files.values())
      if (this.done(f) && !unread.has(f) && (!oldest || f.lastGrowth < oldest.lastGrowth)) oldest = f;
    if (oldest) this.letGo(oldest, now);
  }

  /** Lets go of the files quiet for long, and of the least lately grown of those done past the bound. */
  private release(now: number): void {
    const done = [...this.files.values()].filter((f) => this.done(f) && !this.carried.has(f));
    done.sort((a, b) => a.lastGrowth - b.lastGrowth);
    const over = this.files.size - (this.o.maxFiles ?? MAX_FILES);
    done.forEach((f, i) => {
      if (i < over || (this.settled(f, now) && now - f.lastGrowth >= (this.o.releaseMs ?? 3_600_000)))
        this.letGo(f, now);
    });
  }

  /** Read to its end with no call waiting in it (something may still be left to settle). */
  private done(f: FollowedFile): boolean {
    return f.atEnd && !f.queue.length;
  }

  /** Done, and quiet for the settle time: nothing of it is left to settle. */
  private settled(f: FollowedFile, now: number): boolean {
    return this.done(f) && !f.lines.partial && now - f.lastGrowth >= this.o.settleMs;
  }

  /**
   * Lets go of a file and its session's state. One that may still hand on a call when it settles (a response
   * or a line still open, quiet for less than the settle time) is taken up again when a look at it would
   * settle that, if it has not changed by then.
   */
  private letGo(f: FollowedFile, now: number): void {
    this.files.delete(f.path);
    const quiet = now - f.lastGrowth;
    const quick = Math.min(QUICK_SETTLE_MS, this.o.settleMs);
    const open = f.lines.partial || f.lines.waitingSince() !== undefined;
    const at =
      open && quiet < this.o.settleMs ? f.lastGrowth + (quiet < quick ? quick : this.o.settleMs) : undefined;
    this.passed.set(f.path, {
      key: f.statKey,
      ...(f.previous !== undefined ? { previous: f.previous } : {}),
      ...(at !== undefined ? { settle: { at, nextStart: f.nextStart } } : {}),
    });
    if (at !== undefined) this.toSettle.set(f.path, at);
  }
}
