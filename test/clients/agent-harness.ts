// Runs the real agent CLIs (Claude Code, Codex) offline for tests: `cacheward sim --script` and
// `cacheward proxy` as real processes from the built CLI, each agent in a throwaway home. Loopback only;
// an agent gets a fake key and a minimal environment, never the developer's keys or config.

import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, statSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { type ReadRecord, readCaptures } from '../../src/capture/capture-reader.js';
import { builtCli } from '../suite.js';

/** Fake keys: shaped like nothing a provider issues, so they cannot be mistaken for real ones. */
export const FAKE_ANTHROPIC_KEY = 'cacheward-test-anthropic-key-0123456789abcdefghijklmnop';
export const FAKE_OPENAI_KEY = 'cacheward-test-openai-key-0123456789abcdefghijk';
/** The environment variable Codex's provider reads its key from (`env_key` in config.toml). */
export const CODEX_KEY_ENV = 'CACHEWARD_TEST_OPENAI_KEY';

export type AgentName = 'claude' | 'codex';

/**
 * Which Claude Code: the newest on npm when this was written (`claude-code-newest`, an npm alias in
 * package.json), or the older version the project has pinned since (`@anthropic-ai/claude-code`).
 */
export type ClaudeVersion = 'newest' | 'pinned';
export const CLAUDE_PACKAGES: Record<ClaudeVersion, string> = {
  newest: 'claude-code-newest',
  pinned: '@anthropic-ai/claude-code',
};

const CLI = builtCli();
const require = createRequire(import.meta.url);

/** A stdio MCP server an agent should start. */
export interface McpServerSpec {
  command: string;
  args: string[];
  env?: Record<string, string>;
}

export interface StackOptions {
  /**
   * The reply script (`cacheward sim --script`) as the JSON value to write, or a function of the stack's
   * folders for scripts that name files (Claude Code's Read takes absolute paths).
   */
  script: unknown | ((dirs: { root: string; workDir: string }) => unknown);
  /** `cacheward proxy --fix`: fix names, none by default. */
  fix?: string[];
  /** `cacheward proxy --capture` (default full). */
  capture?: 'off' | 'hashes' | 'full';
  /** Keep the temp folder (captures, agent homes) after close; by default it is removed. */
  keep?: boolean;
  /** More `cacheward sim` arguments (e.g. `--faults 529@0.2 --seed 3`). */
  simArgs?: string[];
}

export interface RunOptions {
  prompt: string;
  /** Extra arguments: after `-p PROMPT` for Claude Code, before the prompt for `codex exec`. */
  args?: string[];
  /** The agent's working directory (default the stack's `work` folder). */
  cwd?: string;
  /** Extra environment for the agent. */
  env?: Record<string, string>;
  /** Kill the agent after this long (default 90 s). */
  timeoutMs?: number;
  /** MCP servers: `--mcp-config` for Claude Code, `[mcp_servers]` in Codex's config.toml. */
  mcpServers?: Record<string, McpServerSpec>;
  /** Codex's model (default gpt-5.5). */
  model?: string;
  /** Which Claude Code to run (default the newest). */
  claude?: ClaudeVersion;
  /** Codex: `supports_websockets = true` on its provider, so it uses the Responses WebSocket first. */
  websocket?: boolean;
}

/** One provider's counters as `GET /_sim/stats` reports them. */
export interface ProviderStats {
  entries: number;
  requests: number;
  cacheReads: number;
  cacheWrites: number;
  tokensRead: number;
  tokensWritten: number;
}

export interface SimStats {
  requests: number;
  errors: number;
  tokensRead: number;
  tokensWritten: number;
  anthropic: ProviderStats;
  openai: ProviderStats;
}

/** Tokens one run read from and wrote to the simulated caches, per provider. */
export interface RunTokens {
  anthropic: { read: number; written: number };
  openai: { read: number; written: number };
}

export interface AgentRun {
  agent: AgentName;
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  timedOut: boolean;
  stdout: string;
  stderr: string;
  durationMs: number;
  /** The proxy's capture folder (shared by every run of the stack). */
  captureDir: string;
  /** `GET /_sim/stats` once the run's captures are on disk. */
  simStats: SimStats;
  /** What this run alone read and wrote (the stats' difference over the run). */
  tokens: RunTokens;
  home: string;
  cwd: string;
}

export interface AgentStack {
  root: string;
  simUrl: string;
  proxyUrl: string;
  captureDir: string;
  /** The default working directory of runs. */
  workDir: string;
  run(agent: AgentName, options: RunOptions): Promise<AgentRun>;
  simStats(): Promise<SimStats>;
  /** `POST /_sim/reset`: empties the caches and zeroes the counters. */
  resetSim(): Promise<void>;
  /** Every capture record so far, bodies rebuilt. */
  records(): Promise<ReadRecord[]>;
  /** Stops proxy (flushing its capture) and simulator, and removes the folder unless `keep`. */
  close(): Promise<void>;
}

/** A spawned `cacheward` command and the base URL it printed first. */
interface Served {
  child: ChildProcess;
  url: string;
  stderr: () => string;
}

function serveCli(args: string[], what: string): Promise<Served> {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: build first (npx tsup), as npm test does`);
  const child = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stderr?.on('data', (d) => {
    err += d;
  });
  return new Promise((resolveUrl, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${what} printed no URL within 15 s: ${err}`));
    }, 15_000);
    child.stdout?.on('data', (d) => {
      out += d;
      const m = out.match(/http:\/\/127\.0\.0\.1:\d+/);
      if (m) {
        clearTimeout(timer);
        resolveUrl({ child, url: m[0], stderr: () => err });
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${what} exited ${code} before printing its URL: ${err}`));
    });
  });
}

function stop(s: Served): Promise<void> {
  if (s.child.exitCode !== null || s.child.signalCode !== null) return Promise.resolve();
  return new Promise((done) => {
    const hard = setTimeout(() => s.child.kill('SIGKILL'), 10_000);
    s.child.once('exit', () => {
      clearTimeout(hard);
      done();
    });
    s.child.kill('SIGTERM');
  });
}

async function getJson(url: string): Promise<Record<string, unknown>> {
  const res = await fetch(url);
  if (!res.ok) throw new Error(`GET ${url}: ${res.status}`);
  return (await res.json()) as Record<string, unknown>;
}

/** The Claude Code command: its native binary, or the package's own Node launcher if postinstall did not run. */
export function claudeCommand(version: ClaudeVersion = 'newest'): string[] {
  const pkg = dirname(require.resolve(`${CLAUDE_PACKAGES[version]}/package.json`));
  const bin = join(pkg, 'bin/claude.exe');
  // The postinstall replaces a small placeholder with the platform's native binary.
  if (existsSync(bin) && statSync(bin).size > 64 * 1024) return [bin];
  return [process.execPath, join(pkg, 'cli-wrapper.cjs')];
}

/** The Codex command: the package's launcher, which runs the platform package's native binary. */
export function codexCommand(): string[] {
  const pkg = dirname(require.resolve('@openai/codex/package.json'));
  return [process.execPath, join(pkg, 'bin/codex.js')];
}

const toml = (s: string) => JSON.stringify(s); // a TOML basic string is a JSON string for these values

function codexConfig(proxyUrl: string, options: RunOptions): string {
  const lines = [
    `model = ${toml(options.model ?? 'gpt-5.5')}`,
    'model_provider = "cacheward"',
    '',
    '[model_providers.cacheward]',
    'name = "cacheward proxy"',
    `base_url = ${toml(`${proxyUrl}/v1`)}`,
    `env_key = ${toml(CODEX_KEY_ENV)}`,
    'wire_api = "responses"',
    ...(options.websocket ? ['supports_websockets = true'] : []),
  ];
  for (const [name, spec] of Object.entries(options.mcpServers ?? {})) {
    lines.push('', `[mcp_servers.${name}]`, `command = ${toml(spec.command)}`);
    lines.push(`args = [${spec.args.map(toml).join(', ')}]`);
    // exec mode cannot ask for approval; without this every MCP call is refused.
    lines.push('default_tools_approval_mode = "approve"');
    const env = Object.entries(spec.env ?? {});
    if (env.length) lines.push(`env = { ${env.map(([k, v]) => `${k} = ${toml(v)}`).join(', ')} }`);
  }
  return `${lines.join('\n')}\n`;
}

function statsOf(raw: Record<string, unknown>): SimStats {
  return raw as unknown as SimStats;
}

function tokensBetween(a: SimStats, b: SimStats): RunTokens {
  const d = (p: 'anthropic' | 'openai') => ({
    read: b[p].tokensRead - a[p].tokensRead,
    written: b[p].tokensWritten - a[p].tokensWritten,
  });
  return { anthropic: d('anthropic'), openai: d('openai') };
}

/** Starts `cacheward sim --script` and `cacheward proxy` in front of it, in a fresh temp folder. */
export async function startAgentStack(options: StackOptions): Promise<AgentStack> {
  const root = mkdtempSync(join(tmpdir(), 'cacheward-agents-'));
  const captureDir = join(root, 'captures');
  const workDir = join(root, 'work');
  mkdirSync(workDir);
  const scriptFile = join(root, 'script.json');
  const script = typeof options.script === 'function' ? options.script({ root, workDir }) : options.script;
  writeFileSync(scriptFile, JSON.stringify(script, null, 2));
  const sim = await serveCli(
    ['sim', '--port', '0', '--script', scriptFile, ...(options.simArgs ?? [])],
    'cacheward sim',
  );
  let proxy: Served;
  try {
    proxy = await serveCli(
      [
        'proxy',
        ...[
          '--port',
          '0',
          '--upstream',
          sim.url,
          '--capture',
          options.capture ?? 'full',
          '--dir',
          captureDir,
        ],
        ...(options.fix?.length ? ['--fix', options.fix.join(',')] : []),
      ],
      'cacheward proxy',
    );
  } catch (err) {
    await stop(sim);
    throw err;
  }
  const homes: Partial<Record<AgentName, string>> = {};
  let runs = 0;

  const simStats = async () => statsOf(await getJson(`${sim.url}/_sim/stats`));
  const captured = async () => {
    const c = (await getJson(`${proxy.url}/_cacheward/health`)).capture as Record<string, number | string>;
    return c.mode === 'off'
      ? Number.POSITIVE_INFINITY
      : Number(c.written) + Number(c.dropped) + Number(c.failed);
  };
  // The proxy's capture count keeps going across a simulator reset; the simulator's request count does not.
  let capturedAtReset = 0;

  /** Waits until the proxy has accounted for a record of every request the simulator saw. */
  const settle = async () => {
    const deadline = Date.now() + 10_000;
    for (;;) {
      const [stats, n] = await Promise.all([simStats(), captured()]);
      if (n - capturedAtReset >= stats.requests || Date.now() > deadline) return stats;
      await new Promise((r) => setTimeout(r, 25));
    }
  };

  const homeOf = (agent: AgentName): string => {
    const existing = homes[agent];
    if (existing) return existing;
    const home = join(root, `${agent}-home`);
    mkdirSync(home, { recursive: true, mode: 0o700 });
    homes[agent] = home;
    return home;
  };

  const run = async (agent: AgentName, o: RunOptions): Promise<AgentRun> => {
    runs++;
    const home = homeOf(agent);
    const cwd = o.cwd ?? workDir;
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: home,
      LANG: 'C.UTF-8',
      TERM: 'dumb',
      NO_COLOR: '1',
    };
    let argv: string[];
    if (agent === 'claude') {
      Object.assign(env, {
        ANTHROPIC_BASE_URL: proxy.url,
        ANTHROPIC_API_KEY: FAKE_ANTHROPIC_KEY,
        DISABLE_TELEMETRY: '1',
        DISABLE_AUTOUPDATER: '1',
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
      });
      const mcp: string[] = [];
      if (o.mcpServers) {
        const file = join(home, `mcp-${runs}.json`);
        writeFileSync(file, JSON.stringify({ mcpServers: o.mcpServers }));
        mcp.push('--mcp-config', file);
      }
      argv = [...claudeCommand(o.claude), '-p', o.prompt, ...mcp, ...(o.args ?? [])];
    } else {
      const codexHome = join(home, 'codex');
      mkdirSync(codexHome, { recursive: true, mode: 0o700 });
      writeFileSync(join(codexHome, 'config.toml'), codexConfig(proxy.url, o));
      Object.assign(env, { CODEX_HOME: codexHome, [CODEX_KEY_ENV]: FAKE_OPENAI_KEY });
      argv = [...codexCommand(), 'exec', '--skip-git-repo-check', ...(o.args ?? []), o.prompt];
    }
    Object.assign(env, o.env ?? {});
    const before = await simStats();
    const started = Date.now();
    const [cmd, ...args] = argv as [string, ...string[]];
    // Its own process group, so a timeout ends the agent and everything it started (MCP servers, shells).
    const child = spawn(cmd, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => {
      stdout += d;
    });
    child.stderr.on('data', (d) => {
      stderr += d;
    });
    let timedOut = false;
    const killGroup = (signal: NodeJS.Signals) => {
      try {
        if (child.pid) process.kill(-child.pid, signal);
      } catch {}
    };
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup('SIGTERM');
      setTimeout(() => killGroup('SIGKILL'), 2_000).unref();
    }, o.timeoutMs ?? 90_000);
    const [exitCode, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((done, fail) => {
      child.once('error', fail);
      child.once('close', (code, sig) => done([code, sig]));
    }).finally(() => clearTimeout(timer));
    killGroup('SIGKILL'); // anything the agent left running (an MCP server it did not stop)
    const after = await settle();
    return {
      agent,
      exitCode,
      signal,
      timedOut,
      stdout,
      stderr,
      durationMs: Date.now() - started,
      captureDir,
      simStats: after,
      tokens: tokensBetween(before, after),
      home,
      cwd,
    };
  };

  return {
    root,
    simUrl: sim.url,
    proxyUrl: proxy.url,
    captureDir,
    workDir,
    run,
    simStats,
    async resetSim() {
      await settle();
      capturedAtReset = await captured();
      const res = await fetch(`${sim.url}/_sim/reset`, { method: 'POST', body: '{}' });
      if (!res.ok) throw new Error(`POST /_sim/reset: ${res.status}`);
    },
    async records() {
      await settle();
      const out: ReadRecord[] = [];
      if (!existsSync(captureDir)) return out;
      for await (const r of readCaptures([captureDir])) out.push(r);
      return out;
    },
    async close() {
      await stop(proxy);
      await stop(sim);
      if (!options.keep) await rm(root, { recursive: true, force: true, maxRetries: 3 });
    },
  };
}

/** One run on a fresh stack, closed afterwards; the records are read before the folder goes (see `keep`). */
export async function runAgent(
  agent: AgentName,
  options: StackOptions & RunOptions,
): Promise<AgentRun & { records: ReadRecord[] }> {
  const stack = await startAgentStack(options);
  try {
    const result = await stack.run(agent, options);
    return { ...result, records: await stack.records() };
  } finally {
    await stack.close();
  }
}
