// Where the agents keep their transcripts by default: Claude Code's `$CLAUDE_CONFIG_DIR/projects` (else
// `~/.claude/projects`) and Codex's `$CODEX_HOME/sessions` (else `~/.codex/sessions`). Reads the environment
// and looks at folders only when asked; never creates or writes anything.

import { stat } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';

export type Agent = 'claude-code' | 'codex';

/** The folder an agent writes its transcripts to. */
export function agentFolder(agent: Agent, env: NodeJS.ProcessEnv = process.env): string {
  if (agent === 'claude-code') {
    const config = env.CLAUDE_CONFIG_DIR ? env.CLAUDE_CONFIG_DIR : join(homedir(), '.claude');
    return join(config, 'projects');
  }
  const home = env.CODEX_HOME ? env.CODEX_HOME : join(homedir(), '.codex');
  return join(home, 'sessions');
}

/** Whether a folder exists. */
export async function isFolder(path: string): Promise<boolean> {
  return (await stat(path).catch(() => undefined))?.isDirectory() ?? false;
}
