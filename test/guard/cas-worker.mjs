// A worker process for the CasFileStore tests and the storm benchmark: increments a counter, appends
// acknowledged ids, writes two-document batches, probes the lock for overlap, or reads batches (to be killed).
import { readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CasConflictError, CasFileStore } from '../../dist/guard/index.js';

const [mode, dir, arg] = process.argv.slice(2);
const store = new CasFileStore(dir, { lockTimeoutMs: 30_000 });
const say = (line) => process.stdout.write(`${line}\n`);

/** Reads, changes and writes until the write is not a lost race; other errors are reported, then retried. */
async function update(names, change) {
  for (;;) {
    const ctx = store.context();
    const docs = [];
    for (const n of names) docs.push(await ctx.read(n));
    try {
      await ctx.writeAll(change(docs));
      return;
    } catch (err) {
      if (!(err instanceof CasConflictError)) process.stderr.write(`${mode}: ${err.message}\n`);
    }
  }
}

if (mode === 'increment') {
  for (let i = 0; i < Number(arg); i++) {
    await update(['counter.json'], ([doc]) => [
      {
        name: 'counter.json',
        content: JSON.stringify({ value: (doc ? JSON.parse(doc.content).value : 0) + 1 }),
      },
    ]);
  }
} else if (mode === 'churn') {
  for (let i = 0; ; i++) {
    const ctx = store.context();
    await ctx.read('big.json');
    await ctx.write('big.json', JSON.stringify({ generation: i, pad: String(i % 10).repeat(2_000_000) }));
    if (i === 0) say('started');
  }
} else if (mode === 'append') {
  // Every id printed is an acknowledged write: it must be in log.json at the end, whoever was killed when.
  for (let i = 0; ; i++) {
    const id = `${arg}-${i}`;
    await update(['log.json'], ([doc]) => [
      { name: 'log.json', content: JSON.stringify([...(doc ? JSON.parse(doc.content) : []), id]) },
    ]);
    say(`ack ${id}`);
  }
} else if (mode === 'batch') {
  // Both documents carry the same stamp after every batch; a reader must never see two different ones.
  for (let i = 0; ; i++) {
    const stamp = `${arg}-${i}`;
    await update(['a.json', 'b.json'], () => [
      { name: 'a.json', content: stamp },
      { name: 'b.json', content: stamp },
    ]);
    say(`ack ${stamp}`);
  }
} else if (mode === 'probe') {
  // Holds the store's lock and checks nobody else touches a marker meanwhile. A marker left by a holder that
  // was killed stays as it is; one that changes or goes while this process holds the lock means an overlap.
  const marker = join(arg, 'held-by');
  const read = () => {
    try {
      return readFileSync(marker, 'utf8');
    } catch {
      return undefined;
    }
  };
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  for (let i = 0; ; i++) {
    const mine = `${process.pid}-${i}`;
    await store.locked(async () => {
      const prior = read();
      if (prior !== undefined) {
        await sleep(20);
        if (read() !== prior) say(`overlap ${prior}`);
      }
      writeFileSync(marker, mine);
      await sleep(2);
      if (read() !== mine) say(`overlap ${read()}`);
      say('acquired');
      try {
        unlinkSync(marker);
      } catch {}
    });
  }
} else if (mode === 'hold') {
  // A live holder that is slow (a stalled writer): its lock must never be broken under it.
  await store.locked(async () => {
    say('holding');
    await new Promise((r) => setTimeout(r, Number(arg)));
  });
  say('released');
} else if (mode === 'read') {
  let reads = 0;
  let half = 0;
  const until = Date.now() + Number(arg);
  while (Date.now() < until) {
    const ctx = store.context();
    const a = await ctx.read('a.json');
    const b = await ctx.read('b.json');
    if (a && b) {
      reads++;
      if (a.content !== b.content) half++;
    }
  }
  say(JSON.stringify({ reads, half }));
}
