// `cacheward proxy --log json` prints one JSON line per finished request through the logger's `request`
// channel; `--quiet` prints none. The built CLI as a child process, the simulator on loopback.

import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, describe, expect, it } from 'vitest';
import { createSimulator } from '../../src/sim/simulator.js';
import { startCliProxy } from '../proxy/cli-proxy.js';
import { API_KEY } from '../proxy/helpers.js';

const sim = createSimulator();
const simUrl = await sim.listen();
afterAll(() => sim.close());

const body = {
  model: 'claude-sonnet-4-6',
  max_tokens: 16,
  messages: [{ role: 'user' as const, content: 'hello' }],
};

async function run(flag: string): Promise<{ rows: Array<Record<string, unknown>>; stderr: string[] }> {
  const dir = mkdtempSync(join(tmpdir(), 'cacheward-proxy-log-'));
  const p = await startCliProxy([
    flag,
    ...(flag === '--log' ? ['json'] : []),
    '--upstream',
    simUrl,
    '--dir',
    dir,
  ]);
  try {
    const client = new Anthropic({ apiKey: API_KEY, baseURL: p.url, maxRetries: 0 });
    const reply = await client.messages.create(body).withResponse();
    // The live analysis has named the request once it is on the live page's state.
    for (;;) {
      const state = (await (await fetch(`${p.url}/_cacheward/state`)).json()) as { requests: unknown[] };
      if (state.requests.length) break;
      await new Promise((r) => setImmediate(r));
    }
    expect(reply.response.status).toBe(200);
  } finally {
    p.child.kill('SIGTERM');
    await p.exited; // stderr is whole once the process has exited
  }
  const rows = p.stderr.filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);
  return { rows, stderr: p.stderr };
}

describe('cacheward proxy request lines', () => {
  it('--log json: one JSON row per finished request', async () => {
    const { rows } = await run('--log');
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ provider: 'anthropic', model: 'claude-sonnet-4-6' });
  });

  it('--quiet: no request line, the stop line still', async () => {
    const { rows, stderr } = await run('--quiet');
    expect(rows).toEqual([]);
    expect(stderr.some((l) => l.startsWith('cacheward proxy: stopped; 1 exchange captured'))).toBe(true);
  });
});
