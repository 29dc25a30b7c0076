import { mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { WARM_UP_ROUNDS, warmUpProxy, warmUpRequests } from './warm-up.js';

// Under a TMPDIR of this test's own: another process warming up at the same time (any test that starts the
// CLI's proxy) makes its own folders in the shared one.
const leftovers = () => readdirSync(tmpdir()).filter((n) => n.startsWith('cacheward-warm-up-'));

describe('warmUpProxy', () => {
  let home: string;
  let before: string[];
  const saved = {
    XDG_STATE_HOME: process.env.XDG_STATE_HOME,
    HOME: process.env.HOME,
    TMPDIR: process.env.TMPDIR,
  };
  const restore = (name: keyof typeof saved) => {
    if (saved[name] === undefined) delete process.env[name];
    else process.env[name] = saved[name];
  };
  beforeEach(() => {
    // The default capture and state folders would be under here: the warm-up must leave them alone.
    home = mkdtempSync(join(tmpdir(), 'cw-warm-home-'));
    process.env.XDG_STATE_HOME = join(home, 'state');
    process.env.HOME = home;
    mkdirSync(join(home, 'tmp'));
    process.env.TMPDIR = join(home, 'tmp');
    before = leftovers();
  });
  afterEach(() => {
    for (const name of ['XDG_STATE_HOME', 'HOME', 'TMPDIR'] as const) restore(name);
    rmSync(home, { recursive: true, force: true });
  });

  it('gets an answer to every generated exchange, with and without fixes, and leaves nothing behind', async () => {
    const sent = WARM_UP_ROUNDS * warmUpRequests(0).length;
    for (const fixes of [undefined, ['tools-freeze', 'pin-reminders']]) {
      for (const capture of ['hashes', 'full', 'off'] as const) {
        const result = await warmUpProxy({ capture, ...(fixes ? { fixes } : {}) });
        expect(result.error).toBeUndefined();
        expect(result.exchanges).toBe(sent);
      }
    }
    expect(readdirSync(home)).toEqual(['tmp']);
    expect(leftovers()).toEqual(before);
  });

  it('sends each round as another conversation, Anthropic and OpenAI routes both', () => {
    const a = warmUpRequests(0);
    const b = warmUpRequests(1);
    expect(new Set(a.map((r) => r.path))).toEqual(
      new Set(['/v1/messages', '/v1/chat/completions', '/v1/responses']),
    );
    expect(JSON.stringify(a)).not.toBe(JSON.stringify(b));
  });

  it('stops at its time limit, says why, and still cleans up', async () => {
    const result = await warmUpProxy({ timeoutMs: 1 });
    expect(result.error).toMatch(/took longer than 1 ms/);
    expect(result.exchanges).toBeLessThan(WARM_UP_ROUNDS * warmUpRequests(0).length);
    expect(leftovers()).toEqual(before);
  });

  it('an unknown fix stops the warm-up with its reason, not the caller', async () => {
    const result = await warmUpProxy({ fixes: ['no-such-fix'] });
    expect(result.exchanges).toBe(0);
    expect(result.error).toMatch(/no-such-fix/);
    expect(leftovers()).toEqual(before);
  });

  it('a temporary folder it cannot make stops it with the reason, and nothing is left listening', async () => {
    process.env.TMPDIR = join(home, 'missing');
    const result = await warmUpProxy({ capture: 'full', fixes: ['tools-freeze'] });
    expect(result.exchanges).toBe(0);
    expect(result.error).toMatch(/ENOENT.*missing/);
    expect(readdirSync(home)).toEqual(['tmp']);
  });

  it('a signal stops it as the time limit does, says so, and it still cleans up', async () => {
    const stop = new AbortController();
    const running = warmUpProxy({ capture: 'full', signal: stop.signal });
    setTimeout(() => stop.abort(), 30);
    const result = await running;
    expect(result.error).toBe('interrupted');
    expect(result.exchanges).toBeLessThan(WARM_UP_ROUNDS * warmUpRequests(0).length);
    expect(leftovers()).toEqual(before);
  });
});
