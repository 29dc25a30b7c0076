import { spawn, spawnSync } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createSimAgentHomes, runHomesDir } from './sim-agent-homes.js';

const URL_ = 'http://127.0.0.1:5000';
const tmp = () => mkdtempSync(join(tmpdir(), 'cacheward-homes-'));
const before = process.env.XDG_STATE_HOME;
afterEach(() => {
  if (before === undefined) delete process.env.XDG_STATE_HOME;
  else process.env.XDG_STATE_HOME = before;
});

/** A pid no process has now (a child that has exited). */
const deadPid = () => spawnSync(process.execPath, ['-e', '0']).pid as number;

describe('the homes run --sim gives the agents', () => {
  it('makes a run folder of its own beside the capture folder, onboarding said done, removed after', async () => {
    process.env.XDG_STATE_HOME = tmp();
    const homes = await createSimAgentHomes(URL_);
    expect(homes.root.startsWith(runHomesDir())).toBe(true);
    expect(JSON.parse(readFileSync(join(homes.claude, '.claude.json'), 'utf8'))).toEqual({
      hasCompletedOnboarding: true,
    });
    expect(readFileSync(join(homes.codex, 'config.toml'), 'utf8')).toContain(`"${URL_}/v1"`);
    await homes.remove();
    expect(existsSync(homes.root)).toBe(false);
  });

  it('removes the folder a killed run left behind, and never a live run’s', async () => {
    process.env.XDG_STATE_HOME = tmp();
    const left = join(runHomesDir(), 'homes-left');
    const live = join(runHomesDir(), 'homes-live');
    for (const [dir, pid] of [
      [left, deadPid()],
      [live, process.pid],
    ] as const) {
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, '.cacheward-run.pid'), `${pid}\n`);
      utimesSync(dir, new Date(0), new Date(0));
    }
    const homes = await createSimAgentHomes(URL_);
    expect(existsSync(left)).toBe(false);
    expect(existsSync(live)).toBe(true);
    await homes.remove();
  });

  it('keeps --agent-home, and refuses one that others can write, a file, a link, one in use, or none', async () => {
    const kept = join(tmp(), 'agents');
    const homes = await createSimAgentHomes(URL_, kept);
    await homes.remove();
    expect(existsSync(join(kept, 'claude'))).toBe(true);
    // A link planted where config.toml goes is replaced, never written through.
    const victim = join(tmp(), 'victim.txt');
    writeFileSync(victim, 'mine');
    const toml = join(kept, 'codex', 'config.toml');
    spawnSync('rm', [toml]);
    symlinkSync(victim, toml);
    await (await createSimAgentHomes(URL_, kept)).remove();
    expect(readFileSync(victim, 'utf8')).toBe('mine');

    const open = join(tmp(), 'open');
    mkdirSync(open);
    chmodSync(open, 0o777);
    await expect(createSimAgentHomes(URL_, open)).rejects.toThrow(
      /can be written by other users \(mode 777\)/,
    );
    const file = join(tmp(), 'afile');
    writeFileSync(file, '');
    await expect(createSimAgentHomes(URL_, file)).rejects.toThrow(/is a file, not a folder/);
    const link = join(tmp(), 'link');
    symlinkSync(kept, link);
    await expect(createSimAgentHomes(URL_, link)).rejects.toThrow(/is a symbolic link/);
    await expect(createSimAgentHomes(URL_, '')).rejects.toThrow(/give the folder/);
    // Another run holds it: a live process's pid in its lock.
    const busy = join(tmp(), 'busy');
    mkdirSync(busy, { mode: 0o700 });
    const other = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 30000)']);
    try {
      writeFileSync(join(busy, '.cacheward-run.pid'), `${other.pid}\n`);
      await expect(createSimAgentHomes(URL_, busy)).rejects.toThrow(
        `in use by another cacheward run (pid ${other.pid})`,
      );
    } finally {
      other.kill();
    }
  });
});
