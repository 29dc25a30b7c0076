// The proxy and the simulator start and stop the same way: `await x.listen()`, `x.url`, `await x.close()`.
// Real servers on loopback; never a port beyond 127.0.0.1.

import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { AlreadyListeningError, NotListeningError } from '../../src/core/listen.js';
import { createProxy } from '../../src/proxy/create-proxy.js';
import { createSimulator } from '../../src/sim/simulator.js';

const servers = {
  proxy: () => createProxy({ dir: mkdtempSync(join(tmpdir(), 'cacheward-listen-')), logger: {} }),
  simulator: () => createSimulator(),
};

describe.each(Object.entries(servers))('%s', (name, make) => {
  it('has no url before listen(), a loopback url after, none after close()', async () => {
    const s = make();
    expect(() => s.url).toThrow(NotListeningError);
    const url = await s.listen();
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(s.url).toBe(url);
    const res = await fetch(`${url}/${name === 'proxy' ? '_cacheward/health' : '_sim/stats'}`);
    expect(res.status).toBe(200);
    await s.close();
    expect(() => s.url).toThrow(NotListeningError);
    await expect(fetch(`${url}/_sim/stats`)).rejects.toThrow();
    await s.close(); // twice is fine
  });

  it('refuses a second listen() while listening', async () => {
    const s = make();
    await s.listen({ port: 0, host: '127.0.0.1' });
    try {
      await expect(s.listen()).rejects.toBeInstanceOf(AlreadyListeningError);
    } finally {
      await s.close();
    }
  });

  it('closes before listen() without error', async () => {
    await make().close();
  });
});
