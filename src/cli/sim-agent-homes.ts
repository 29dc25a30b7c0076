// The homes `cacheward run --sim` gives the agents: Claude Code's CLAUDE_CONFIG_DIR and Codex's CODEX_HOME
// (its config.toml pointing Codex at the proxy), fresh ones never the user's: nothing of theirs is read or written.

import { lstat, mkdir, mkdtemp, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { defaultCaptureDir } from '../capture/default-dir.js';
import { InputError, writeErrorLine } from '../core/errors.js';
import { processAlive } from '../core/process-alive.js';

export interface SimAgentHomes {
  /** Claude Code's config folder (its settings, and its transcripts under `projects/`). */
  claude: string;
  /** Codex's home (config.toml, and its rollouts under `sessions/`). */
  codex: string;
  /** Where both are: a folder removed after the run, or the one the user asked to keep them in. */
  root: string;
  kept: boolean;
  remove(): Promise<void>;
}

/** A TOML basic string: the JSON string of the same text is one for these values. */
const toml = (s: string) => JSON.stringify(s);

/** The file that says which cacheward process is using a folder of homes (its pid). */
const LOCK = '.cacheward-run.pid';

/** A run's folder this old with no live process in its lock was left by a run that was killed (ms). */
const STALE_MS = 60_000;

/**
 * Where a run's homes go when they are not kept: beside the capture folder (`…/state/cacheward-run`), not
 * under the system's temporary folder, where Codex refuses to set up its helper binaries.
 */
export function runHomesDir(env: NodeJS.ProcessEnv = process.env): string {
  return join(dirname(defaultCaptureDir(env)), 'cacheward-run');
}

/**
 * Creates both homes (folders 0700, files 0600): in a folder of this run's own removed by `remove()`, or
 * in `keepIn` (`--agent-home`), kept and reused by the next run there, as a HOME would be. A kept folder
 * must be the user's own and writable by nobody else (its settings could run commands), and one run uses
 * it at a time (the next run's config.toml would point Codex elsewhere).
 */
export async function createSimAgentHomes(proxyUrl: string, keepIn?: string): Promise<SimAgentHomes> {
  let root: string | undefined;
  let locked = false;
  try {
    if (keepIn !== undefined) {
      if (keepIn.trim() === '') throw new InputError('--agent-home: give the folder to keep the agents in');
      root = resolve(keepIn);
      await mkdir(dirname(root), { recursive: true });
      await ownFolder(root, '--agent-home');
    } else {
      await mkdir(runHomesDir(), { recursive: true, mode: 0o700 });
      await removeLeftBehind(runHomesDir());
      root = await mkdtemp(join(runHomesDir(), 'homes-'));
    }
    const at = root;
    await takeLock(at, keepIn !== undefined);
    locked = true;
    const claude = join(at, 'claude');
    const codex = join(at, 'codex');
    for (const dir of [claude, codex]) await ownFolder(dir, keepIn === undefined ? 'run' : '--agent-home');
    await replaceFile(
      join(codex, 'config.toml'),
      `# Written by cacheward run --sim for its runs only: Codex answers from the simulator.\nopenai_base_url = ${toml(`${proxyUrl}/v1`)}\n`,
    );
    // A config folder of its own is a first start: an interactive Claude Code would run its onboarding,
    // which checks the real API. Said done, as the user's own config says it.
    const config = join(claude, '.claude.json');
    if (!(await exists(config)))
      await replaceFile(config, `${JSON.stringify({ hasCompletedOnboarding: true })}\n`);
    const remove = async () => {
      if (keepIn === undefined) await rm(at, { recursive: true, force: true });
      else await rm(join(at, LOCK), { force: true });
    };
    return { claude, codex, root: at, kept: keepIn !== undefined, remove };
  } catch (err) {
    // Nothing of a run that did not start is left: its own folder, or the lock it took in a kept one.
    if (root !== undefined && keepIn === undefined) await rm(root, { recursive: true, force: true });
    else if (root !== undefined && locked) await rm(join(root, LOCK), { force: true });
    if (err instanceof InputError || !(err as NodeJS.ErrnoException).code) throw err;
    // A full disk (or any refused write): one line naming the file, not a stack (replaceFile names it).
    throw new InputError(
      `run --sim: cannot set up the agents' homes${keepIn !== undefined ? ` in --agent-home ${root ?? keepIn}` : ''}: ${writeErrorLine(err)}`,
    );
  }
}

async function exists(path: string): Promise<boolean> {
  return (await lstat(path).catch(() => undefined)) !== undefined;
}

/** `path` as a folder of this user's that nobody else can write: made 0700 if absent, refused otherwise. */
async function ownFolder(path: string, flag: string): Promise<void> {
  const s = await lstat(path).catch(() => undefined);
  if (!s) {
    await mkdir(path, { mode: 0o700 });
    return;
  }
  const why = !s.isDirectory()
    ? s.isSymbolicLink()
      ? 'is a symbolic link'
      : 'is a file, not a folder'
    : process.getuid && s.uid !== process.getuid()
      ? `belongs to another user (uid ${s.uid})`
      : s.mode & 0o022
        ? `can be written by other users (mode ${(s.mode & 0o777).toString(8)})`
        : undefined;
  if (why)
    throw new InputError(
      `${flag}: ${path} ${why}; the agents' settings there could run commands as you: give a folder of your own that only you can write`,
    );
}

/**
 * Writes `path` whole by a rename over it (a symbolic link there is replaced, never followed). On failure
 * the temp file is removed and the error names `path` (a write's own message names none).
 */
async function replaceFile(path: string, text: string): Promise<void> {
  const tmp = `${path}.${process.pid}.tmp`;
  try {
    await rm(tmp, { force: true });
    await writeFile(tmp, text, { mode: 0o600, flag: 'wx' });
    await rename(tmp, path);
  } catch (err) {
    await rm(tmp, { force: true }).catch(() => {});
    const e = err as NodeJS.ErrnoException;
    e.message = `writing ${path}: ${e.message}`;
    throw e;
  }
}

async function lockHolder(root: string): Promise<number | undefined> {
  const text = await readFile(join(root, LOCK), 'utf8').catch(() => undefined);
  const pid = text === undefined ? Number.NaN : Number.parseInt(text, 10);
  return Number.isInteger(pid) && pid > 0 ? pid : undefined;
}

/** Marks `root` as this process's; a kept folder another live run holds is refused. */
async function takeLock(root: string, kept: boolean): Promise<void> {
  const holder = await lockHolder(root);
  if (kept && holder !== undefined && holder !== process.pid && processAlive(holder))
    throw new InputError(
      `--agent-home: ${root} is in use by another cacheward run (pid ${holder}); one run at a time per folder`,
    );
  await replaceFile(join(root, LOCK), `${process.pid}\n`);
}

/** Removes the run folders of runs that were killed before they could (no live process in their lock). */
async function removeLeftBehind(dir: string): Promise<void> {
  for (const name of await readdir(dir).catch(() => [] as string[])) {
    if (!name.startsWith('homes-')) continue;
    const path = join(dir, name);
    const s = await lstat(path).catch(() => undefined);
    if (!s?.isDirectory() || Date.now() - s.mtimeMs < STALE_MS) continue;
    const holder = await lockHolder(path);
    if (holder === undefined || !processAlive(holder)) await rm(path, { recursive: true, force: true });
  }
}
