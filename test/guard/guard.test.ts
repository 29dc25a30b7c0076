import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  CasConflictError,
  CasFileStore,
  CorruptStoreError,
  NotReadFirstError,
  STORE_FILE,
} from '../../src/guard/cas-file-store.js';
import { checkNotStale, StaleGuard, snapshotToken } from '../../src/guard/snapshot-token.js';
import { defaultIsWrite, ToolGate } from '../../src/guard/tool-gate.js';
import { needsBuild } from '../suite.js';

const worker = needsBuild(join(import.meta.dirname, 'cas-worker.mjs'));
const tmp = (p: string) => mkdtempSync(join(tmpdir(), p));

describe('ToolGate', () => {
  it('refuses tools outside the allow list, naming the allowed ones and saying not to retry', () => {
    const gate = new ToolGate({ allow: ['Read', 'Grep'] });
    expect(gate.check('Read', { path: 'a' })).toEqual({ ok: true });
    const no = gate.check('Bash', { cmd: 'ls' });
    expect(no.ok).toBe(false);
    expect(!no.ok && no.reason).toMatch(/Allowed tools: Read, Grep\. Do not retry/);
  });

  it('classifies writes, batch forms included, and takes a custom classifier', () => {
    expect(defaultIsWrite('Write', {})).toBe(true);
    expect(defaultIsWrite('memory_update', {})).toBe(true);
    expect(defaultIsWrite('skillManage', { operations: [{ op: 'read' }, { op: 'delete', name: 'x' }] })).toBe(
      true,
    );
    expect(defaultIsWrite('skillManage', { operations: [{ op: 'read' }, { op: 'list' }] })).toBe(false);
    expect(defaultIsWrite('Read', { path: 'a' })).toBe(false);
    const gate = new ToolGate({ allow: ['memory'] });
    expect(gate.check('memory', { operations: [{ op: 'create' }] }).ok).toBe(false);
    const custom = new ToolGate({
      allow: ['memory'],
      isWrite: (_n, a) => (a as { mode?: string }).mode === 'w',
    });
    expect(custom.check('memory', { mode: 'r' }).ok).toBe(true);
    expect(custom.check('memory', { mode: 'w' }).ok).toBe(false);
  });
});

describe('snapshotToken and the stale guard', () => {
  const messages = [
    { role: 'user', content: 'a' },
    { content: [{ text: 'b', type: 'text' }], role: 'assistant' },
  ];
  it('is canonical: key order does not change the token', () => {
    const reordered = [
      { content: 'a', role: 'user' },
      { role: 'assistant', content: [{ type: 'text', text: 'b' }] },
    ];
    expect(snapshotToken(reordered)).toBe(snapshotToken(messages));
  });
  it('blocks a write when the live conversation moved on, and fails closed on bad live state', () => {
    const guard = new StaleGuard(messages);
    expect(guard.check(structuredClone(messages))).toEqual({ ok: true });
    expect(guard.check([...messages, { role: 'user', content: 'c' }]).ok).toBe(false);
    for (const bad of [undefined, null, 'text', { messages }, [1, 2], [messages[0], null]]) {
      expect(checkNotStale(guard.snapshot, bad).ok).toBe(false);
    }
  });
});

describe('CasFileStore', () => {
  it('refuses to overwrite a document it did not read, and a document that changed since', async () => {
    const store = new CasFileStore(tmp('cas-'));
    const a = store.context();
    expect(await a.read('m.md')).toBeUndefined();
    await a.write('m.md', 'one');
    const blind = store.context();
    await expect(blind.write('m.md', 'blind')).rejects.toBeInstanceOf(NotReadFirstError);
    const b = store.context();
    await b.read('m.md');
    await a.write('m.md', 'two');
    await expect(b.write('m.md', 'stale')).rejects.toBeInstanceOf(CasConflictError);
    expect((await store.context().read('m.md'))?.content).toBe('two');
  });

  it('writes batches all or nothing', async () => {
    const store = new CasFileStore(tmp('cas-batch-'));
    const setup = store.context();
    await setup.read('x');
    await setup.read('y');
    await setup.writeAll([
      { name: 'x', content: '1' },
      { name: 'y', content: '1' },
    ]);
    const ctx = store.context();
    await ctx.read('x');
    await ctx.read('y');
    const other = store.context();
    await other.read('y');
    await other.write('y', 'changed elsewhere');
    await expect(
      ctx.writeAll([
        { name: 'x', content: '2' },
        { name: 'y', content: '2' },
      ]),
    ).rejects.toBeInstanceOf(CasConflictError);
    expect((await store.context().read('x'))?.content).toBe('1');
  });

  it('shows a context one snapshot: a batch written after its first read is not half visible', async () => {
    const store = new CasFileStore(tmp('cas-snapshot-'));
    const setup = store.context();
    await setup.read('a');
    await setup.read('b');
    await setup.writeAll([
      { name: 'a', content: 'old' },
      { name: 'b', content: 'old' },
    ]);
    const reader = store.context();
    expect((await reader.read('a'))?.content).toBe('old');
    const writer = store.context();
    await writer.read('a');
    await writer.read('b');
    await writer.writeAll([
      { name: 'a', content: 'new' },
      { name: 'b', content: 'new' },
    ]);
    expect((await reader.read('b'))?.content).toBe('old');
    await expect(reader.write('b', 'from the old snapshot')).rejects.toBeInstanceOf(CasConflictError);
    expect((await store.context().read('b'))?.content).toBe('new');
  });

  it('takes its folder first: an options object in its place is a CachewardError with a code, at once', () => {
    const wrong = () => new CasFileStore({ dir: tmp('cas-args-') } as unknown as string);
    expect(wrong).toThrow(
      /new CasFileStore\(dir, options\?\) takes the folder as a string first \(got an object\)/,
    );
    try {
      wrong();
    } catch (err) {
      expect((err as { code?: string }).code).toBe('CW_CAS_DIR');
    }
  });

  it('names a snapshot file it did not write, and what to do', async () => {
    const dir = tmp('cas-corrupt-');
    writeFileSync(join(dir, STORE_FILE), '{"documents": [1]');
    await expect(new CasFileStore(dir).context().read('m.md')).rejects.toThrow(
      new RegExp(`${join(dir, STORE_FILE)} is not a cacheward document store \\(not JSON\\); move it away`),
    );
    writeFileSync(join(dir, STORE_FILE), '{"v": 1, "documents": {"m.md": 3}}');
    await expect(new CasFileStore(dir).context().read('m.md')).rejects.toBeInstanceOf(CorruptStoreError);
  });

  it('loses no update when several processes write at once', async () => {
    const dir = tmp('cas-procs-');
    const runs = Array.from(
      { length: 4 },
      () =>
        new Promise<number | null>((resolve) =>
          spawn(process.execPath, [worker, 'increment', dir, '25'], { stdio: 'inherit' }).on('exit', resolve),
        ),
    );
    expect(await Promise.all(runs)).toEqual([0, 0, 0, 0]);
    const doc = await new CasFileStore(dir).context().read('counter.json');
    expect(JSON.parse(doc?.content ?? '{}')).toEqual({ value: 100 });
  }, 60_000);

  it('leaves the old or the new document after a kill -9 mid-write, never a torn one', async () => {
    const dir = tmp('cas-kill-');
    for (let round = 0; round < 3; round++) {
      const child = spawn(process.execPath, [worker, 'churn', dir], { stdio: ['ignore', 'pipe', 'inherit'] });
      await new Promise<void>((resolve) => child.stdout.once('data', () => resolve()));
      await new Promise((r) => setTimeout(r, 30 + round * 40));
      child.kill('SIGKILL');
      await new Promise((r) => child.once('exit', r));
      const read = await new CasFileStore(dir).context().read('big.json');
      const doc = JSON.parse(read?.content ?? '{}') as { generation: number; pad: string };
      expect(doc.pad).toBe(String(doc.generation % 10).repeat(2_000_000));
      // The dead process's lock died with it: the next writer carries on at once.
      const ctx = new CasFileStore(dir).context();
      await ctx.read('big.json');
      await ctx.write('big.json', JSON.stringify({ generation: 0, pad: '0'.repeat(2_000_000) }));
    }
  }, 60_000);
});
