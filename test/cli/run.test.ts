import { type ChildProcess, spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PriceTable } from '../../src/analyze/price-table.js';
import { readCaptures } from '../../src/capture/capture-reader.js';
import { agentArgs, agentEnv, SIM_ANTHROPIC_KEY, SIM_OPENAI_KEY } from '../../src/cli/commands/run.js';
import { analyzePaths } from '../../src/report/analyze-paths.js';
import { missLine } from '../../src/report/miss-line.js';
import { builtCli } from '../suite.js';
import { cli } from './run-cli.js';

const bin = builtCli();
const agent = join(import.meta.dirname, 'sdk-agent.mjs');

interface Ran {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs the built `cacheward` with pipes (stdin not a terminal), optionally acting on it once it prints
 * `ready`; `extra` adds to its environment, `cwd` is where it runs.
 */
function cacheward(
  args: string[],
  onReady?: (child: ChildProcess) => void,
  extra: { env?: Record<string, string>; cwd?: string; closeStdin?: boolean } = {},
): Promise<Ran> {
  expect(existsSync(bin), 'dist/ is built by `npm test` (tsup) before vitest runs').toBe(true);
  return new Promise((resolve) => {
    const env = { ...process.env };
    for (const k of ['ANTHROPIC_API_KEY', 'ANTHROPIC_AUTH_TOKEN', 'OPENAI_API_KEY', 'CODEX_API_KEY'])
      delete env[k];
    Object.assign(env, extra.env ?? {});
    const child = spawn(process.execPath, [bin, ...args], {
      stdio: ['pipe', 'pipe', 'pipe'],
      env,
      ...(extra.cwd ? { cwd: extra.cwd } : {}),
    });
    // Codex reads a piped stdin to its end before it starts: give it one that has ended.
    if (extra.closeStdin) child.stdin.end();
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
    // It sent nothing at all: said as such (not that it used the wrong variables).
    expect(r.stderr).toContain(
      'cacheward run: node sent nothing: no request reached the proxy, and none tried to leave this machine',
    );
  }, 30_000);

  it('says in one line when the command does not exist, and exits 2', async () => {
    const r = await cacheward(['run', '--sim', '--capture', 'off', '--', '/nonexistent/agent', '--flag']);
    expect(r.code).toBe(2);
    expect(r.stderr.trim().split('\n')).toEqual([
      "cacheward: /nonexistent/agent: command not found; give the agent's command after --, e.g. cacheward run -- claude",
    ]);
  }, 30_000);

  it('refuses --sim with an upstream, --script or --agent-home without --sim and a missing command', async () => {
    expect((await cli(['run', '--sim', '--upstream', 'http://127.0.0.1:1', '--', 'true'])).stderr).toContain(
      '--sim answers every route itself',
    );
    expect((await cli(['run', '--script', 'x.json', '--', 'true'])).stderr).toContain('only with --sim');
    expect((await cli(['run', '--agent-home', 'h', '--', 'true'])).stderr).toContain(
      '--agent-home: only with --sim',
    );
    const bad = await cli(['run', '--upstream', 'ftp://example.com', '--', 'true']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('not an http(s) URL with a host');
  });
});

describe('cacheward run --sim keeps the agent offline', () => {
  const root = join(import.meta.dirname, '../..');
  // The real Codex, the project's devDependency, as `npx` finds it (no install, no network).
  const npxCodex = ['npx', '--prefix', root, '--no-install', 'codex'];
  const refusedLine = (stderr: string) => stderr.split('\n').find((l) => l.includes('refused what'));

  it('Codex behind npx answers from the simulator, and nothing it sends leaves loopback', async () => {
    const cwd = mkdtempSync(join(tmpdir(), 'cacheward-run-npx-codex-'));
    const dir = mkdtempSync(join(tmpdir(), 'cacheward-run-npx-'));
    const r = await cacheward(
      ['run', '--sim', '--dir', dir, '--', ...npxCodex, 'exec', '--skip-git-repo-check', 'say hi'],
      undefined,
      // A real-looking key in cacheward's own environment: the agent gets the placeholder instead.
      { cwd, env: { OPENAI_API_KEY: 'sk-proj-this-must-not-reach-the-agent' }, closeStdin: true },
    );
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('Simulated reply');
    // Every model request reached the simulator through the proxy. Whatever else Codex opens (its update
    // and feature checks: github.com, chatgpt.com) went to the loopback guard and was refused, listed by host.
    const n = /cacheward run: (\d+) requests? in/.exec(r.stderr);
    expect(Number(n?.[1]), r.stderr).toBeGreaterThan(0);
    expect(refusedLine(r.stderr) ?? '').not.toContain('api.openai.com');
    const files = fullReport(r.stderr).slice(2);
    const result = await analyzePaths(files, { prices: new PriceTable() });
    expect(result.totals.requests).toBe(Number(n?.[1]));
    for await (const x of readCaptures(files, { bodies: false })) expect(x.record.provider).toBe('openai');
  }, 120_000);

  it('Codex behind a wrapper script is redirected too (its CODEX_HOME), with no argument to find', async () => {
    const cwd = mkdtempSync(join(tmpdir(), 'cacheward-run-wrapper-'));
    const wrapper = join(cwd, 'my-agent.sh');
    writeFileSync(wrapper, `#!/bin/sh\nexec ${npxCodex.join(' ')} "$@"\n`);
    chmodSync(wrapper, 0o755);
    const r = await cacheward(
      [
        'run',
        '--sim',
        '--capture',
        'hashes',
        '--dir',
        cwd,
        '--',
        wrapper,
        'exec',
        '--skip-git-repo-check',
        'hi',
      ],
      undefined,
      { cwd, closeStdin: true },
    );
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('Simulated reply');
    expect(Number(/cacheward run: (\d+) requests? in/.exec(r.stderr)?.[1]), r.stderr).toBeGreaterThan(0);
    expect(refusedLine(r.stderr) ?? '').not.toContain('api.openai.com');
  }, 120_000);

  it('refuses, with a message, what an agent tries to send past the proxy, and says where it tried to go', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cacheward-run-leak-'));
    // A client that honours HTTPS_PROXY but not the base URLs: a CONNECT to the real API through it.
    const leak = `
      const http = require('node:http');
      const p = new URL(process.env.HTTPS_PROXY);
      const req = http.request({ host: p.hostname, port: p.port, method: 'CONNECT', path: 'api.openai.com:443' });
      req.on('connect', (res, socket, head) => {
        let body = String(head);
        socket.on('data', (d) => { body += d; });
        socket.on('end', () => { console.log('status ' + res.statusCode + ' ' + body.trim()); });
      });
      req.end();`;
    const r = await cacheward(['run', '--sim', '--dir', dir, '--', 'node', '-e', leak]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^status 403 cacheward run --sim: refused; the agent runs offline/m);
    expect(refusedLine(r.stderr)).toContain('api.openai.com:443');
    expect(r.stderr).toContain('cacheward run: no request reached the proxy');
  }, 30_000);
});

describe('the environment and arguments the agent gets', () => {
  const url = 'http://127.0.0.1:5000';

  it('points both SDKs at the proxy; under --sim placeholder keys replace real ones, the rest goes to the guard', () => {
    const offline = {
      guardUrl: 'http://127.0.0.1:6000',
      codexHome: '/tmp/codex-home',
      claudeHome: '/tmp/claude-home',
    };
    const sim = agentEnv({ PATH: '/bin' }, url, offline);
    expect(sim).toMatchObject({
      ANTHROPIC_BASE_URL: url,
      OPENAI_BASE_URL: `${url}/v1`,
      CACHEWARD_PROXY_URL: url,
      ANTHROPIC_API_KEY: SIM_ANTHROPIC_KEY,
      OPENAI_API_KEY: SIM_OPENAI_KEY,
      CODEX_API_KEY: SIM_OPENAI_KEY,
      CODEX_HOME: '/tmp/codex-home',
      CLAUDE_CONFIG_DIR: '/tmp/claude-home',
      HTTPS_PROXY: offline.guardUrl,
      HTTP_PROXY: offline.guardUrl,
      ALL_PROXY: offline.guardUrl,
      https_proxy: offline.guardUrl,
      NO_PROXY: '127.0.0.1,localhost,::1',
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
      PATH: '/bin',
    });
    // A real key in the environment never reaches an offline agent.
    const own = agentEnv(
      {
        ANTHROPIC_AUTH_TOKEN: 'oauth',
        OPENAI_API_KEY: 'sk-real',
        CODEX_HOME: '/home/me/.codex',
        CLAUDE_CONFIG_DIR: '/home/me/.claude',
      },
      url,
      offline,
    );
    expect(own.ANTHROPIC_AUTH_TOKEN).toBeUndefined();
    expect(own.ANTHROPIC_API_KEY).toBe(SIM_ANTHROPIC_KEY);
    expect(own.OPENAI_API_KEY).toBe(SIM_OPENAI_KEY);
    expect(own.CODEX_API_KEY).toBe(SIM_OPENAI_KEY);
    expect(own.CODEX_HOME).toBe('/tmp/codex-home');
    expect(own.CLAUDE_CONFIG_DIR).toBe('/tmp/claude-home');
    const real = agentEnv({ OPENAI_API_KEY: 'sk-real' }, url, false);
    expect(real.OPENAI_API_KEY).toBe('sk-real');
    expect(real.ANTHROPIC_API_KEY).toBeUndefined();
    expect(real.HTTPS_PROXY).toBeUndefined();
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
    // Through a launcher: the override goes right after Codex's name, the launcher's options before it.
    const o = ['-c', `openai_base_url="${url}/v1"`];
    expect(agentArgs('npx', ['codex', 'exec', 'hi'], url)).toEqual(['codex', ...o, 'exec', 'hi']);
    expect(agentArgs('npx', ['--no-install', 'codex', 'exec'], url)).toEqual([
      '--no-install',
      'codex',
      ...o,
      'exec',
    ]);
    expect(agentArgs('/usr/bin/npx', ['-y', '@openai/codex@0.171.0', 'exec'], url)).toEqual([
      '-y',
      '@openai/codex@0.171.0',
      ...o,
      'exec',
    ]);
    expect(agentArgs('pnpm', ['dlx', '@openai/codex', 'exec'], url)).toEqual([
      'dlx',
      '@openai/codex',
      ...o,
      'exec',
    ]);
    expect(agentArgs('bunx', ['codex', 'exec'], url)).toEqual(['codex', ...o, 'exec']);
    // Not Codex's name where a launcher runs its command: left alone (under --sim its CODEX_HOME still holds).
    expect(agentArgs('npx', ['tsx', 'codex.ts'], url)).toEqual(['tsx', 'codex.ts']);
    expect(agentArgs('./run-codex.sh', ['exec', 'hi'], url)).toEqual(['exec', 'hi']);
  });
});
