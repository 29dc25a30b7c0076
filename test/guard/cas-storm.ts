// The kill -9 storm for the CasFileStore, shared by its test (a few seconds) and bench/reliability.ts (30 s):
// writer processes append acknowledged ids and two-document batches while the lock holder is killed -9.

import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { CasFileStore } from '../../src/guard/cas-file-store.js';
import { needsBuild } from '../suite.js';

const worker = needsBuild(join(import.meta.dirname, 'cas-worker.mjs'));

export interface StormOptions {
  dir: string;
  /** Processes appending ids to one document, and writing two-document batches. */
  appenders: number;
  batchers: number;
  durationMs: number;
  /** How often a process is killed -9: the lock holder when one holds it, else any writer. */
  killEveryMs: number;
}

export interface StormResult {
  /** Writes whose success a writer printed before it was (maybe) killed. */
  acknowledged: number;
  /** Acknowledged appends missing from the final document. */
  lost: string[];
  /** Ids in the final document more than once. */
  duplicated: number;
  kills: number;
  /** Kills that hit the process holding the lock. */
  holderKills: number;
  /** Lock acquisitions by the probe, and how many found another live holder inside. */
  acquisitions: number;
  overlaps: number;
  /** Two-document reads by the reader, and how many saw one document of a batch without the other. */
  reads: number;
  halfReads: number;
}

interface Worker {
  child: ChildProcess;
  role: 'append' | 'batch' | 'probe';
  exited: Promise<void>;
}

export async function runStorm(o: StormOptions): Promise<StormResult> {
  mkdirSync(o.dir, { recursive: true });
  const probeDir = `${o.dir}-probe`;
  mkdirSync(probeDir, { recursive: true });
  const store = new CasFileStore(o.dir);
  const acked = new Set<string>();
  let appendAcks = 0;
  let acquisitions = 0;
  let overlaps = 0;
  let generation = 0;
  let stopping = false;
  const workers = new Set<Worker>();

  const start = (role: Worker['role']): void => {
    const tag = `${role[0]}${++generation}`;
    const child = spawn(process.execPath, [worker, role, o.dir, role === 'probe' ? probeDir : tag], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let buf = '';
    child.stdout?.on('data', (d: Buffer) => {
      buf += d;
      const lines = buf.split('\n');
      buf = lines.pop() ?? '';
      for (const line of lines) {
        if (line.startsWith('ack ')) {
          if (role === 'append') {
            acked.add(line.slice(4));
            appendAcks++;
          }
        } else if (line === 'acquired') acquisitions++;
        else if (line.startsWith('overlap ')) overlaps++;
      }
    });
    child.stderr?.resume();
    const w: Worker = {
      child,
      role,
      exited: new Promise((resolve) => child.once('exit', () => resolve())),
    };
    workers.add(w);
    void w.exited.then(() => {
      workers.delete(w);
      if (!stopping) start(role);
    });
  };

  for (let i = 0; i < o.appenders; i++) start('append');
  for (let i = 0; i < o.batchers; i++) start('batch');
  start('probe');
  const reader = spawn(process.execPath, [worker, 'read', o.dir, String(o.durationMs)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let readerOut = '';
  reader.stdout.on('data', (d: Buffer) => {
    readerOut += d;
  });
  const readerDone = new Promise<void>((resolve) => reader.once('exit', () => resolve()));

  let kills = 0;
  let holderKills = 0;
  const until = Date.now() + o.durationMs;
  while (Date.now() < until) {
    await new Promise((r) => setTimeout(r, o.killEveryMs * (0.5 + Math.random())));
    const holder = await store.holder();
    const live = [...workers];
    const victim = live.find((w) => w.child.pid === holder) ?? live[Math.floor(Math.random() * live.length)];
    if (!victim) continue;
    if (victim.child.pid === holder) holderKills++;
    victim.child.kill('SIGKILL');
    kills++;
  }
  stopping = true;
  const remaining = [...workers];
  for (const w of remaining) w.child.kill('SIGKILL');
  await Promise.all(remaining.map((w) => w.exited));
  await readerDone;

  const doc = await store.context().read('log.json');
  const ids: string[] = doc ? JSON.parse(doc.content) : [];
  const present = new Set(ids);
  const { reads, half } = JSON.parse(readerOut || '{"reads":0,"half":0}') as { reads: number; half: number };
  return {
    acknowledged: appendAcks,
    lost: [...acked].filter((id) => !present.has(id)),
    duplicated: ids.length - present.size,
    kills,
    holderKills,
    acquisitions,
    overlaps,
    reads,
    halfReads: half,
  };
}
