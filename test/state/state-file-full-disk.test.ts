// The fix state file on a full disk, through its one seam to the disk (node:fs/promises' open): a temp file
// whose write the disk refuses (ENOSPC) while `disk.full`, as a full tmpfs does.
import { mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';

const disk = vi.hoisted(() => ({ full: false }));

vi.mock('node:fs/promises', async (importOriginal) => {
  const fs = await importOriginal<typeof import('node:fs/promises')>();
  const open = async (...args: Parameters<typeof fs.open>) => {
    const h = await fs.open(...args);
    if (!/conversations\.json\..*\.tmp$/.test(String(args[0]))) return h;
    const writeFile = h.writeFile.bind(h);
    return Object.assign(h, {
      writeFile: async (data: string) => {
        if (!disk.full) return writeFile(data);
        throw Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
      },
    });
  };
  return { ...fs, open, default: { ...fs, open } };
});

const { PrefixBuilder } = await import('../../src/prefix/build-prefix.js');
const { agentConversation } = await import('../../src/sim/agent-conversation.js');
const { MemoryProxyState } = await import('../../src/state/memory-proxy-state.js');

const builder = new PrefixBuilder();

/** Commits one turn of conversation `seed` with a fix state, as the proxy does after a response. */
async function turn(state: InstanceType<typeof MemoryProxyState>, id: string, seed: number) {
  const body = agentConversation({ turns: 1, seed });
  const p = await state.prepare(
    id,
    builder.parse(JSON.stringify(body), { format: 'anthropic-messages' }),
    {},
    Date.now(),
  );
  if (!p.ok) throw new Error(p.detail);
  await state.commit(p, '/v1/messages', 200, {
    states: new Map([['tools-freeze', { n: id }]]),
    pair: { client: [], forwarded: [] },
  });
}

describe('the fix state file on a full disk', () => {
  it('says once that saving fails, naming the file; leaves no temp file; health says so; says when it works again', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cacheward-state-full-'));
    const logs: string[] = [];
    const state = new MemoryProxyState({ stateDir: dir, log: (l) => logs.push(l) });
    // Closed: every commit is written at once (no interval), and close() waits for it.
    await state.close();
    const file = join(dir, 'conversations.json');
    disk.full = true;
    for (let i = 0; i < 5; i++) {
      await turn(state, `r${i}`, i + 1);
      await state.close();
    }
    expect(logs).toEqual([
      `state not saved to ${file} (it stays in memory; tried again at each change): the disk is full (ENOSPC: no space left on device, write)`,
    ]);
    expect(readdirSync(dir)).toEqual([]);
    expect(state.health()).toMatchObject({
      status: 'degraded',
      fixState: { persisted: false, dir, error: 'the disk is full (ENOSPC: no space left on device, write)' },
    });
    disk.full = false;
    await turn(state, 'r5', 6);
    await state.close();
    expect(logs.slice(1)).toEqual([`state saved again to ${file}`]);
    expect(readdirSync(dir)).toEqual(['conversations.json']);
    expect(state.health()).toMatchObject({ status: 'ok', fixState: { persisted: true, dir } });
    expect(state.health().fixState).not.toHaveProperty('error');
  });
});
