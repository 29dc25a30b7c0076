// Where captures go by default: $XDG_STATE_HOME/cacheward, else ~/.local/state/cacheward.
// Reads the environment only when asked; never creates anything.

import { homedir } from 'node:os';
import { join } from 'node:path';

export function defaultCaptureDir(env: NodeJS.ProcessEnv = process.env): string {
  const state =
    env.XDG_STATE_HOME && env.XDG_STATE_HOME.length > 0
      ? env.XDG_STATE_HOME
      : join(homedir(), '.local', 'state');
  return join(state, 'cacheward');
}
