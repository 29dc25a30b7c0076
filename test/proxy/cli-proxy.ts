// Starts the built `cacheward proxy` (dist/) as a child process for tests that need a real process: kill -9,
// signals, its RSS, its environment. Resolves once the first line has printed the base URL.

import { type ChildProcess, spawn } from 'node:child_process';
import { builtCli } from '../suite.js';

export const BIN = builtCli();

export interface CliProxy {
  child: ChildProcess;
  url: string;
  stderr: string[];
  exited: Promise<number | null>;
}

/** `cacheward proxy --port 0 …args`, optionally under a shell prefix (e.g. `ulimit -f 0;`). */
export async function startCliProxy(
  args: string[],
  o: { env?: NodeJS.ProcessEnv; shellPrefix?: string } = {},
): Promise<CliProxy> {
  const argv = [BIN, 'proxy', '--port', '0', ...args];
  const child = o.shellPrefix
    ? spawn('bash', ['-c', `${o.shellPrefix} exec "$0" "$@"`, process.execPath, ...argv], {
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...process.env, ...o.env },
      })
    : spawn(process.execPath, argv, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...o.env } });
  const stderr: string[] = [];
  let errBuf = '';
  child.stderr?.on('data', (d: Buffer) => {
    errBuf += d;
    const lines = errBuf.split('\n');
    errBuf = lines.pop() ?? '';
    stderr.push(...lines);
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const url = await new Promise<string>((resolve, reject) => {
    let buf = '';
    child.stdout?.on('data', (d: Buffer) => {
      buf += d;
      const m = buf.match(/http:\/\/127\.0\.0\.1:\d+/);
      if (m) resolve(m[0]);
    });
    void exited.then((code) => reject(new Error(`proxy exited ${code}: ${stderr.join(' | ')}${errBuf}`)));
  });
  return { child, url, stderr, exited };
}
