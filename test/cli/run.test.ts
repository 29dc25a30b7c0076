import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PriceTable } from '../../src/analyze/price-table.js';
import { readCaptures } from '../../src/capture/capture-reader.js';
import { agentArgs, agentEnv, SIM_ANTHROPIC_KEY, SIM_OPENAI_KEY } from '../../src/cli/commands/run.js';
import { analyzePaths } from '../../src/report/analyze-paths.js';
import { missLine } from '../../src/report/miss-line.js';
import { cli } from './run-cli.js';

const bin = join(import.meta.dirname, '../../dist/cli/bin.js');
const agent = join(import.meta.dirname, 'sdk-agent.mjs');

interface Ran {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Runs the built `cacheward` with pipes (stdin not a terminal), optionally acting on it once it prints `ready`. */
function cacheward(args: string[], onReady?: (child: ChildProcess) => void): Promise<Ran> {
  expect(existsSync(bin), 'dist/ is built by `npm test` (tsup) before vitest runs').toBe(true);
  return new Promise((resolve) => {
    const env = { ...process.env };
    for (const k of ['ANTHROPIC_API_KEY', 'ANTHROPIC_AUTH_TOKEN', 'OPENAI_API_KEY', 'CODEX_API_KEY'])
      delete env[k];
    const child = spawn(process.execPath, [bin, ...args], { stdio: ['pipe', 'pipe', 'pipe'], env });
    let stdout = '';
    let stderr = '';
    let ready = false;
    child.stdout.on('data', (d) => {
      stdout += String(d);
      if (!ready && stdout.includes('ready\n')) {
        ready = true;
        onReady?.(child);
      }
    });
    child.stderr.on('data', (d) => {
      stderr += String(d);
    });
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
}

const fullReport = (stderr: string) => {
  const line = stderr.split('\n').find((l) => l.trim().startsWith('full report: '));
  expect(line, stderr).toBeDefined();
  return (line as string).trim().slice('full report: '.length).split(' ');
};

describe('cacheward run', () => {
  it('runs an SDK agent through the proxy into the simulator, summarizes the run and exits with its code', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cacheward-run-'));
    const r = await cacheward(['run', '--sim', '--capture', 'full', '--dir', dir, '--', 'node', agent, '3']);
    expect(r.code, r.stderr).toBe(3);
    // The agent found the proxy and (having none) placeholder keys in its environment, and its stdout is its own.
    expect(r.stdout).toMatch(/^base urls: http:\/\/127\.0\.0\.1:\d+ http:\/\/127\.0\.0\.1:\d+\/v1$/m);
    expect(r.stdout).toContain('keys: placeholder');
    expect(r.stdout).toContain('agent done: chat ok, responses ok');
    expect(r.stdout).not.toContain('cacheward');
    // The summary, on stderr, is the analyzer's result for this run's captures.
    const command = fullReport(r.stderr);
    expect(command.slice(0, 2)).toEqual(['cacheward', 'report']);
    const files = command.slice(2);
    expect(files.length).toBe(1);
    expect(files[0]?.startsWith(dir)).toBe(true);
    const result = await analyzePaths(files, { prices: new PriceTable() });
    expect(result.totals.requests).toBe(6);
    expect(r.stderr).toContain('node exited with 3.');
    expect(r.stderr).toContain(`cacheward run: 6 requests in ${result.totals.sessions} sessions`);
    expect(r.stderr).toContain(`hit rate ${((result.totals.hitRate ?? 0) * 100).toFixed(1)}% token-weighted`);
    const top = result.byCause.filter((c) => c.cause !== 'cold_start');
    expect(top.length).toBeGreaterThan(0);
    for (const c of top.slice(0, 3)) {
      const worst = result.misses.find((m) => m.cause === c.cause);
      expect(r.stderr).toContain(`${c.cause} ×${c.misses}`);
      if (worst) expect(r.stderr).toContain(missLine(worst));
    }
    // The tools[] change the agent made mid-session is what the analyzer names first.
    expect(top[0]?.cause).toBe('tools_changed');
    // The printed command is the full report of exactly this run.
    const report = await cli(command.slice(1));
    expect(report.code).toBe(0);
    expect(report.stdout).toMatch(/^cacheward report: \d+ sessions?, 6 requests/);
    // Full mode keeps the bodies: every request of the run can be shown.
    const ids: string[] = [];
    for await (const x of readCaptures(files)) ids.push(x.record.id);
    const shown = await cli(['show', ids[0] as string, '--dir', dir]);
    expect(shown.code).toBe(0);
    expect(JSON.parse(shown.stdout).model).toBe('claude-opus-5');
  }, 60_000);

  it('applies --fix in the proxy it starts', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cacheward-run-fix-'));
    const r = await cacheward(['run', '--sim', '--fix', 'tools-freeze', '--dir', dir, '--', 'node', agent]);
    expect(r.code, r.stderr).toBe(0);
    const files = fullReport(r.stderr).slice(2);
    const notes: string[] = [];
    for await (const x of readCaptures(files, { bodies: false }))
      for (const f of x.record.fixes) if (f.changed) notes.push(f.fix);
    expect(notes).toContain('tools-freeze');
    const result = await analyzePaths(files, { prices: new PriceTable() });
    expect(result.misses.map((m) => m.cause)).not.toContain('tools_changed');
  }, 60_000);

  it('passes SIGTERM on to the agent and exits with the code the agent chose', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cacheward-run-sig-'));
    const r = await cacheward(['run', '--sim', '--dir', dir, '--', 'node', agent, '--wait-for-signal'], (c) =>
      c.kill('SIGTERM'),
    );
    expect(r.stdout).toContain('got SIGTERM');
    expect(r.code, r.stderr).toBe(42);
    // The agent's last request, made while it handled the signal, is in the summary.
    expect(r.stderr).toContain('cacheward run: 2 requests');
  }, 60_000);

  it('passes SIGINT on when stdin is not a terminal', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cacheward-run-int-'));
    const r = await cacheward(['run', '--sim', '--dir', dir, '--', 'node', agent, '--wait-for-signal'], (c) =>
      c.kill('SIGINT'),
    );
    expect(r.stdout).toContain('got SIGINT');
    expect(r.code, r.stderr).toBe(43);
  }, 60_000);

  it('exits 128 + N when a signal ends the agent', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cacheward-run-kill-'));
    const r = await cacheward([
      'run',
      '--sim',
      '--dir',
      dir,
      '--',
      'node',
      '-e',
      "process.kill(process.pid, 'SIGKILL')",
    ]);
    expect(r.code).toBe(128 + 9);
    expect(r.stderr).toContain('no request went through the proxy');
  }, 30_000);

  it('says in one line when the command does not exist, and exits 2', async () => {
    const r = await cacheward(['run', '--sim', '--capture', 'off', '--', '/nonexistent/agent', '--flag']);
    expect(r.code).toBe(2);
    expect(r.stderr.trim().split('\n')).toEqual([
      "cacheward: /nonexistent/agent: command not found; give the agent's command after --, e.g. cacheward run -- claude",
    ]);
  }, 30_000);

  it('refuses --sim with an upstream, --script without --sim and a missing command', async () => {
    expect((await cli(['run', '--sim', '--upstream', 'http://127.0.0.1:1', '--', 'true'])).stderr).toContain(
      '--sim answers every route itself',
    );
    expect((await cli(['run', '--script', 'x.json', '--', 'true'])).stderr).toContain('only with --sim');
    const bad = await cli(['run', '--upstream', 'ftp://example.com', '--', 'true']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('not an http(s) URL with a host');
  });
});

describe('the environment and arguments the agent gets', () => {
  const url = 'http://127.0.0.1:5000';

  it('points both SDKs at the proxy, and under --sim gives placeholder keys only where there are none', () => {
    const sim = agentEnv({ PATH: '/bin' }, url, true);
    expect(sim).toMatchObject({
      ANTHROPIC_BASE_URL: url,
      OPENAI_BASE_URL: `${url}/v1`,
      CACHEWARD_PROXY_URL: url,
      ANTHROPIC_API_KEY: SIM_ANTHROPIC_KEY,
      OPENAI_API_KEY: SIM_OPENAI_KEY,
      CODEX_API_KEY: SIM_OPENAI_KEY,
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
      PATH: '/bin',
    });
    const own = agentEnv({ ANTHROPIC_AUTH_TOKEN: 'oauth', OPENAI_API_KEY: 'mine' }, url, true);
    expect(own.ANTHROPIC_API_KEY).toBeUndefined();
    expect(own.OPENAI_API_KEY).toBe('mine');
    expect(own.CODEX_API_KEY).toBe('mine');
    const real = agentEnv({}, url, false);
    expect(real.ANTHROPIC_API_KEY).toBeUndefined();
    expect(real.CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC).toBeUndefined();
  });

  it('gives codex the proxy as openai_base_url, and leaves other commands’ arguments alone', () => {
    expect(agentArgs('/x/node_modules/.bin/codex', ['exec', 'hi'], url)).toEqual([
      '-c',
      `openai_base_url="${url}/v1"`,
      'exec',
      'hi',
    ]);
    expect(agentArgs('codex', ['-c', 'openai_base_url="http://elsewhere"', 'exec'], url)).toEqual([
      '-c',
      'openai_base_url="http://elsewhere"',
      'exec',
    ]);
    expect(agentArgs('/usr/bin/node', ['/x/@openai/codex/bin/codex.js', 'exec', 'hi'], url)).toEqual([
      '/x/@openai/codex/bin/codex.js',
      '-c',
      `openai_base_url="${url}/v1"`,
      'exec',
      'hi',
    ]);
    expect(agentArgs('claude', ['-p', 'hi'], url)).toEqual(['-p', 'hi']);
    expect(agentArgs('node', ['agent.mjs', 'codex'], url)).toEqual(['agent.mjs', 'codex']);
  });
});
