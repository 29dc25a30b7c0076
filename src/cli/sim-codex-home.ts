// The CODEX_HOME `cacheward run --sim` gives the agent: a fresh folder whose config.toml points Codex's
// built-in provider at the proxy, however Codex is launched (npx, a path, a wrapper script). Never the
// user's own CODEX_HOME: nothing of theirs (auth, config, sessions) is read or written by a simulated run.

import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface SimCodexHome {
  dir: string;
  remove(): Promise<void>;
}

/** A TOML basic string: the JSON string of the same text is one for these values. */
const toml = (s: string) => JSON.stringify(s);

/** Creates the folder (0700) and its config.toml (0600). */
export async function createSimCodexHome(proxyUrl: string): Promise<SimCodexHome> {
  const dir = await mkdtemp(join(tmpdir(), 'cacheward-run-codex-'));
  await writeFile(
    join(dir, 'config.toml'),
    `# Written by cacheward run --sim for this run only: Codex answers from the simulator.\nopenai_base_url = ${toml(`${proxyUrl}/v1`)}\n`,
    { mode: 0o600 },
  );
  return { dir, remove: () => rm(dir, { recursive: true, force: true }) };
}
