import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createSimulator } from '../../src/sim/simulator.js';
import { startCliProxy } from '../proxy/cli-proxy.js';
import { cli } from './run-cli.js';

const sim = createSimulator({ requireApiKey: false });
const simUrl = await sim.listen();
afterAll(() => sim.close());
const tmp = () => mkdtempSync(join(tmpdir(), 'cacheward-token-cli-'));

async function statusWith(url: string, token?: string): Promise<number> {
  const res = await fetch(`${url}/_cacheward/health`, {
    headers: token ? { 'x-cacheward-token': token } : {},
  });
  await res.arrayBuffer();
  return res.status;
}

describe('cacheward proxy takes its token from outside the command line', () => {
  for (const source of ['env', 'file'] as const) {
    it(`from ${source === 'env' ? 'CACHEWARD_TOKEN' : '--token-file'}`, async () => {
      const dir = tmp();
      const file = join(dir, 'token');
      writeFileSync(file, 'secret-from-outside-42\n');
      chmodSync(file, 0o600);
      const p = await startCliProxy(
        [
          '--upstream',
          simUrl,
          '--dir',
          join(dir, 'captures'),
          ...(source === 'file' ? ['--token-file', file] : []),
        ],
        source === 'env' ? { env: { CACHEWARD_TOKEN: 'secret-from-outside-42' } } : {},
      );
      try {
        expect(await statusWith(p.url)).toBe(401);
        expect(await statusWith(p.url, 'secret-from-outside-42')).toBe(200);
        expect(p.stderr.join('\n')).not.toContain('secret-from-outside-42');
      } finally {
        p.child.kill('SIGTERM');
        await p.exited;
      }
    });
  }

  it('names a token file it cannot use, and exits 2', async () => {
    const dir = tmp();
    const missing = await cli(['proxy', '--token-file', join(dir, 'nope'), '--dir', dir]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(new RegExp(`--token-file ${join(dir, 'nope')}: ENOENT`));
    writeFileSync(join(dir, 'empty'), '\n');
    const empty = await cli(['proxy', '--token-file', join(dir, 'empty'), '--dir', dir]);
    expect(empty.code).toBe(2);
    expect(empty.stderr).toMatch(/must hold the token on one line/);
  });
});
