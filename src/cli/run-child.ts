// Runs the agent for `cacheward run`: inherited stdio, signals passed on, and how it ended.
// It never kills the child on its own account, and never lets a signal meant for the child end cacheward first.

import { spawn } from 'node:child_process';
import { constants } from 'node:os';
import { InputError } from '../core/errors.js';

/** Signals passed on to the child. */
const FORWARDED: readonly NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT', 'SIGUSR2'];
/** Signals a terminal sends to its whole foreground group: the child has its own copy already. */
const FROM_TERMINAL = new Set<NodeJS.Signals>(['SIGINT', 'SIGQUIT']);

export interface ChildExit {
  /** The exit code for cacheward: the child's, or 128 + the signal number when a signal ended it. */
  code: number;
  signal: NodeJS.Signals | null;
}

/**
 * Starts `command` with `args` and `env`, waits for it to end. While it runs, SIGTERM, SIGHUP and SIGUSR2
 * are passed on; SIGINT and SIGQUIT too unless stdin is a terminal (then Ctrl-C already reached the child,
 * and a second copy would read as a double Ctrl-C).
 */
export function runChild(
  command: string,
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  onSpawn: () => void = () => {},
): Promise<ChildExit> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, [...args], { stdio: 'inherit', env });
    child.once('spawn', onSpawn);
    const terminal = process.stdin.isTTY === true;
    const handlers = new Map<NodeJS.Signals, () => void>();
    for (const sig of FORWARDED) {
      const h = () => {
        if (terminal && FROM_TERMINAL.has(sig)) return;
        if (child.exitCode === null && child.signalCode === null) child.kill(sig);
      };
      handlers.set(sig, h);
      process.on(sig, h);
    }
    const done = () => {
      for (const [sig, h] of handlers) process.off(sig, h);
    };
    child.once('error', (err: NodeJS.ErrnoException) => {
      done();
      reject(
        err.code === 'ENOENT'
          ? new InputError(
              `${command}: command not found; give the agent's command after --, e.g. cacheward run -- claude`,
            )
          : err.code === 'EACCES'
            ? new InputError(`${command}: not executable (permission denied)`)
            : new InputError(`${command}: cannot start: ${err.message}`),
      );
    });
    child.once('exit', (code, signal) => {
      done();
      resolve({
        code: signal ? 128 + (constants.signals[signal] ?? 0) : (code ?? 1),
        signal,
      });
    });
  });
}
