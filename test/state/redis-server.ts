// Starts a real redis-server (Debian's package; `npm test` installs it) on a free loopback port, with an
// append-only file so a stop and start keeps its data, and stops, restarts or kills it on demand.

import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fullSuiteOnly } from '../suite.js';

export interface RedisServer {
  port: number;
  url: string;
  /** Runs a redis-cli command against it and returns its output. */
  cli(...args: string[]): string;
  /** SIGTERM and wait: Redis saves and exits (a clean stop). */
  stop(): Promise<void>;
  /** Starts it again on the same port and folder. */
  start(): Promise<void>;
  /** Freezes the server (SIGSTOP) for `ms`: connections stay open, nothing is answered. Resolves after SIGCONT. */
  pause(ms: number): Promise<void>;
  close(): Promise<void>;
}

export function redisInstalled(): boolean {
  return spawnSync('redis-server', ['--version']).status === 0;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

export interface StartRedisOptions {
  /**
   * When the append-only file is fsynced: `always` (default here: every write is on disk before Redis
   * answers, so a test's stop and start loses nothing) or `everysec` (Redis's own default with AOF).
   */
  appendfsync?: 'always' | 'everysec';
}

export async function startRedis(options: StartRedisOptions = {}): Promise<RedisServer> {
  fullSuiteOnly('redis-server');
  if (!redisInstalled())
    throw new Error(
      "redis-server is not installed: run 'bash scripts/ensure-redis.sh' (npm test does) or apt-get install redis-server",
    );
  const dir = mkdtempSync(join(tmpdir(), 'cacheward-redis-'));
  const port = await freePort();
  let child: ChildProcess | undefined;
  const launch = async () => {
    const c = spawn(
      'redis-server',
      [
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--dir',
        dir,
        '--save',
        '',
        '--appendonly',
        'yes',
        '--appendfsync',
        options.appendfsync ?? 'always',
        '--protected-mode',
        'yes',
        '--loglevel',
        'warning',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    child = c;
    let out = '';
    c.stdout?.on('data', (d) => {
      out += String(d);
    });
    // Ready when it answers PING.
    const deadline = Date.now() + 10_000;
    for (;;) {
      if (c.exitCode !== null) throw new Error(`redis-server exited: ${out}`);
      const ping = spawnSync('redis-cli', ['-p', String(port), 'ping'], { encoding: 'utf8' });
      if (ping.stdout.trim() === 'PONG') return;
      if (Date.now() > deadline) throw new Error(`redis-server did not start on ${port}: ${out}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  const stop = async () => {
    const c = child;
    if (!c || c.exitCode !== null) return;
    const exited = new Promise<void>((r) => c.once('exit', () => r()));
    c.kill('SIGTERM');
    await exited;
  };
  await launch();
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    cli: (...args) => spawnSync('redis-cli', ['-p', String(port), ...args], { encoding: 'utf8' }).stdout,
    stop,
    start: launch,
    pause: async (ms) => {
      const c = child;
      if (!c || c.exitCode !== null) return;
      c.kill('SIGSTOP');
      await new Promise((r) => setTimeout(r, ms));
      c.kill('SIGCONT');
    },
    close: async () => {
      child?.kill('SIGCONT');
      await stop();
    },
  };
}
