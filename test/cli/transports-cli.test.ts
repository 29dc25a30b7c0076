// The transport commands and flags: `cacheward ca` (made on first use, where it is, how to trust it, never
// the key), `--open-host` only with `--forward`, `run --forward --base-url` refused, and run's agent modes.

import { mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { agentKind, forwardEnv, runMode, transportLine } from '../../src/cli/run-mode.js';
import { CA_KEY_FILE } from '../../src/proxy/local-ca.js';
import { cli } from './run-cli.js';

describe('cacheward ca', () => {
  it('makes the CA on first use, says where it is and how to trust it, and never prints the key', async () => {
    const dir = join(mkdtempSync(join(tmpdir(), 'cacheward-ca-cli-')), 'ca');
    const first = await cli(['ca', '--ca-dir', dir]);
    expect(first.code).toBe(0);
    expect(first.stdout).toContain(`cacheward local CA: ${join(dir, 'cacheward-ca.pem')} (created now)`);
    expect(first.stdout).toContain(`export NODE_EXTRA_CA_CERTS=${join(dir, 'cacheward-ca.pem')}`);
    expect(first.stdout).toMatch(/update-ca-certificates/);
    expect(statSync(join(dir, CA_KEY_FILE)).mode & 0o777).toBe(0o600);
    const key = readFileSync(join(dir, CA_KEY_FILE), 'utf8').split('\n')[1] as string;
    expect(first.stdout).not.toContain(key);
    const again = await cli(['ca', '--ca-dir', dir, '--json']);
    const facts = JSON.parse(again.stdout);
    expect(facts).toMatchObject({ cert: join(dir, 'cacheward-ca.pem'), created: false });
    expect(facts.fingerprint).toMatch(/^([0-9A-F]{2}:){31}[0-9A-F]{2}$/);
  });

  it('refuses a folder it cannot use, with exit 2', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'cacheward-ca-cli-')), 'not-a-dir');
    writeFileSync(file, 'x');
    const r = await cli(['ca', '--ca-dir', join(file, 'ca')]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^cacheward: /);
  });
});

describe('flags', () => {
  it('takes --open-host only with --forward, and not --forward with --base-url', async () => {
    const open = await cli(['proxy', '--open-host', 'llm.example', '--no-warm-up']);
    expect(open.code).toBe(2);
    expect(open.stderr).toContain('--open-host: only with --forward');
    const both = await cli(['run', '--sim', '--forward', '--base-url', '--', 'true']);
    expect(both.code).toBe(2);
    expect(both.stderr).toContain('--forward and --base-url: choose one');
  });
});

describe('run modes', () => {
  it('knows Claude Code and Codex by their command or node launcher', () => {
    expect(agentKind('claude', [])).toBe('claude');
    expect(agentKind('/x/claude-code-newest/bin/claude.exe', ['-p'])).toBe('claude');
    expect(agentKind('node', ['/x/node_modules/@anthropic-ai/claude-code/cli.js'])).toBe('claude');
    expect(agentKind('node', ['/x/@openai/codex/bin/codex.js', 'exec'])).toBe('codex');
    expect(agentKind('codex', ['exec'])).toBe('codex');
    expect(agentKind('node', ['agent.mjs'])).toBe('other');
    expect(runMode('claude', {})).toBe('forward');
    expect(runMode('claude', { baseUrl: true })).toBe('base-url');
    expect(runMode('codex', {})).toBe('base-url');
    expect(runMode('other', { forward: true })).toBe('forward');
  });

  it('sets HTTPS_PROXY and the CA, keeps your base URLs and extra CAs, and names a base URL it will not see', () => {
    const dir = mkdtempSync(join(tmpdir(), 'cacheward-run-mode-'));
    const ca = join(dir, 'cacheward-ca.pem');
    const theirs = join(dir, 'corp.pem');
    writeFileSync(ca, 'CACHEWARD CA\n');
    writeFileSync(theirs, 'CORP CA\n');
    const made = {
      ANTHROPIC_BASE_URL: 'http://127.0.0.1:1',
      OPENAI_BASE_URL: 'http://127.0.0.1:1/v1',
      X: '1',
    };
    const plain = forwardEnv(made, {}, 'http://127.0.0.1:1', ca, ['api.anthropic.com']);
    expect(plain.env).toEqual({
      X: '1',
      HTTPS_PROXY: 'http://127.0.0.1:1',
      https_proxy: 'http://127.0.0.1:1',
      NODE_EXTRA_CA_CERTS: ca,
    });
    expect(plain.notes).toEqual([]);
    const user = { ANTHROPIC_BASE_URL: 'https://gw.corp.example', NODE_EXTRA_CA_CERTS: theirs };
    const mixed = forwardEnv(made, user, 'http://127.0.0.1:1', ca, ['api.anthropic.com']);
    expect(mixed.env.ANTHROPIC_BASE_URL).toBe('https://gw.corp.example');
    expect(mixed.notes[0]).toContain('--open-host gw.corp.example');
    const bundle = mixed.env.NODE_EXTRA_CA_CERTS as string;
    expect(readFileSync(bundle, 'utf8')).toBe('CORP CA\n\nCACHEWARD CA\n');
    mixed.cleanup();
    expect(() => statSync(bundle)).toThrow();
    expect(transportLine('base-url', { sockets: 1, responses: 2 })).toBe(
      '  transport: base URL (ANTHROPIC_BASE_URL, OPENAI_BASE_URL); 2 responses over 1 WebSocket',
    );
  });
});
