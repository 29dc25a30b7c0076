import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, describe, expect, it } from 'vitest';
import { agentConversation } from '../../src/sim/agent-conversation.js';
import { createSimulator } from '../../src/sim/simulator.js';
import { BIN, startCliProxy } from '../proxy/cli-proxy.js';
import { cli } from './run-cli.js';

const sim = createSimulator();
const simUrl = await sim.listen();
afterAll(() => sim.close());

describe('cacheward proxy warms up before it listens, and nothing of the warm-up is left', () => {
  for (const warm of [true, false]) {
    it(warm ? 'with the warm-up (the default)' : 'with --no-warm-up', async () => {
      const home = mkdtempSync(join(tmpdir(), 'cacheward-warm-cli-'));
      const dir = join(home, 'captures');
      // Its own TMPDIR, so what the warm-up leaves there (nothing) is its alone.
      mkdirSync(join(home, 'tmp'));
      const p = await startCliProxy(
        ['--upstream', simUrl, '--dir', dir, '--fix', 'tools-freeze', ...(warm ? [] : ['--no-warm-up'])],
        { env: { HOME: home, XDG_STATE_HOME: join(home, 'state'), TMPDIR: join(home, 'tmp') } },
      );
      try {
        const client = new Anthropic({ apiKey: 'sk-test-warm', baseURL: p.url });
        const body = agentConversation({ turns: 2, seed: 5 }) as unknown as Anthropic.MessageCreateParams;
        await client.messages.create({ ...body, stream: false } as Anthropic.MessageCreateParamsNonStreaming);
        await fetch(`${p.url}/_cacheward/health`).then((r) => r.arrayBuffer());
        const metrics = await (await fetch(`${p.url}/_cacheward/metrics`)).text();
        // The proxy counts only the client's request: the warm-up's went through a proxy of its own.
        expect(metrics).toMatch(/^cacheward_requests_total\{[^}]*\} 1$/m);
      } finally {
        p.child.kill('SIGTERM');
        await p.exited;
      }
      const files = readdirSync(dir).filter((n) => n.endsWith('.jsonl'));
      const records = files.flatMap((f) => readFileSync(join(dir, f), 'utf8').trim().split('\n'));
      expect(records).toHaveLength(1);
      // The default state folder was never touched, nor the temporary one left behind.
      expect(readdirSync(home).sort()).toEqual(['captures', 'tmp']);
      expect(readdirSync(join(home, 'tmp'))).toEqual([]);
      expect(p.stderr.join('\n')).not.toMatch(/warm-up stopped/);
      rmSync(home, { recursive: true, force: true });
    });
  }
});

describe('a configuration the proxy refuses is said once, before any warm-up', () => {
  for (const command of [['proxy'], ['run']]) {
    it(`cacheward ${command[0]} --fix no-such-fix: one line, exit 2`, async () => {
      const home = mkdtempSync(join(tmpdir(), 'cacheward-warm-cli-'));
      const agent = command[0] === 'run' ? ['--', process.execPath, '-e', ''] : [];
      const r = await cli([...command, '--port', '0', '--dir', home, '--fix', 'no-such-fix', ...agent]);
      rmSync(home, { recursive: true, force: true });
      expect(r.code).toBe(2);
      expect(r.stderr.split('\n')).toEqual([expect.stringMatching(/unknown fix "no-such-fix"/)]);
    });
  }
});

describe('a stop signal during the warm-up', () => {
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    it(`${signal}: the process ends as it would have without one, and leaves no temporary folder`, async () => {
      const home = mkdtempSync(join(tmpdir(), 'cacheward-warm-cli-'));
      const tmp = join(home, 'tmp');
      mkdirSync(tmp);
      const child = spawn(
        process.execPath,
        [
          BIN,
          'proxy',
          '--port',
          '0',
          '--upstream',
          simUrl,
          '--dir',
          join(home, 'captures'),
          '--capture',
          'full',
        ],
        { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, TMPDIR: tmp } },
      );
      const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) =>
        child.once('exit', (code, sig) => resolve({ code, signal: sig })),
      );
      let stdout = '';
      child.stdout.on('data', (d: Buffer) => (stdout += d));
      try {
        // The warm-up's folder is there from the warm-up's start to its end: the signal comes inside it.
        for (let i = 0; i < 1000 && !readdirSync(tmp).some((n) => n.startsWith('cacheward-warm-up-')); i++)
          await new Promise((r) => setTimeout(r, 2));
        expect(readdirSync(tmp)).not.toEqual([]);
        child.kill(signal);
        const end = await exited;
        expect(end).toEqual({ code: null, signal });
        expect(stdout).not.toMatch(/listening/);
        expect(readdirSync(tmp)).toEqual([]);
      } finally {
        child.kill('SIGKILL');
        rmSync(home, { recursive: true, force: true });
      }
    });
  }
});
