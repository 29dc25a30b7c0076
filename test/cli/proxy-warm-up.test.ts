import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, describe, expect, it } from 'vitest';
import { agentConversation } from '../../src/demo/agent-conversation.js';
import { createSimulator } from '../../src/sim/simulator.js';
import { startCliProxy } from '../proxy/cli-proxy.js';
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
