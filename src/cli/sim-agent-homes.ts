// The homes `cacheward run --sim` gives the agents: Claude Code's CLAUDE_CONFIG_DIR and Codex's CODEX_HOME
// (its config.toml pointing Codex at the proxy), fresh ones never the user's: nothing of theirs is read or written.

import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { defaultCaptureDir } from '../capture/default-dir.js';

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

/**
 * Where a run's homes go when they are not kept: beside the capture folder (`…/state/cacheward-run`), not
 * under the system's temporary folder, where Codex refuses to set up its helper binaries.
 */
export function runHomesDir(env: NodeJS.ProcessEnv = process.env): string {
  return join(dirname(defaultCaptureDir(env)), 'cacheward-run');
}

/**
 * Creates both homes (folders 0700, config.toml 0600): in a folder of this run's own removed by `remove()`,
 * or in `keepIn` (`--agent-home`), kept and reused by the next run there, as a HOME would be.
 */
export async function createSimAgentHomes(proxyUrl: string, keepIn?: string): Promise<SimAgentHomes> {
  let root: string;
  if (keepIn) root = resolve(keepIn);
  else {
    await mkdir(runHomesDir(), { recursive: true, mode: 0o700 });
    root = await mkdtemp(join(runHomesDir(), 'homes-'));
  }
  const claude = join(root, 'claude');
  const codex = join(root, 'codex');
  for (const dir of [root, claude, codex]) await mkdir(dir, { recursive: true, mode: 0o700 });
  await writeFile(
    join(codex, 'config.toml'),
    `# Written by cacheward run --sim for its runs only: Codex answers from the simulator.\nopenai_base_url = ${toml(`${proxyUrl}/v1`)}\n`,
    { mode: 0o600 },
  );
  return {
    claude,
    codex,
    root,
    kept: keepIn !== undefined,
    remove: keepIn ? async () => {} : () => rm(root, { recursive: true, force: true }),
  };
}
