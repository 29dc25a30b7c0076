// The merge yields a record met in two files once, by its id, while its copy is within the dedupe horizon
// (start times) and window (ids) of the latest record; past them an id is forgotten.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { mergeCaptures } from './merge-captures.js';

const T0 = Date.UTC(2026, 0, 1);
const line = (id: string, start: number) =>
  JSON.stringify({
    v: 1,
    id,
    times: { start },
    session: { key: 's', source: 'header' },
    provider: 'anthropic',
    route: '/v1/messages',
    method: 'POST',
    headers: {},
    betas: [],
    requestBytes: 1,
    fixes: [],
  });

async function ids(paths: string[], options: { dedupeMs?: number; dedupeWindow?: number } = {}) {
  const out: string[] = [];
  let duplicates = 0;
  for await (const r of mergeCaptures(paths, { ...options, onDuplicate: () => duplicates++ }))
    out.push(r.record.id);
  return { out, duplicates };
}

describe('mergeCaptures', () => {
  const dir = mkdtempSync(join(tmpdir(), 'cacheward-merge-'));
  // A file and a copy of its first three records, under another name: the copy's records come out beside
  // the original's. Then records two hours apart.
  const records = ['a', 'b', 'c'].map((id, i) => line(id, T0 + i * 1_000));
  records.push(line('d', T0 + 2 * 3_600_000), line('e', T0 + 2 * 3_600_000 + 1_000));
  writeFileSync(join(dir, 'capture-first.jsonl'), `${records.join('\n')}\n`);
  writeFileSync(join(dir, 'capture-copy.jsonl'), `${records.slice(0, 3).join('\n')}\n`);
  // A copy of the last record, in a file the merge reaches late: still within the hour of it.
  const late = mkdtempSync(join(tmpdir(), 'cacheward-merge-late-'));
  writeFileSync(join(late, 'capture-late.jsonl'), `${records[4]}\n`);

  it('yields each record once however many files hold it', async () => {
    const r = await ids([dir, late]);
    expect(r.out).toEqual(['a', 'b', 'c', 'd', 'e']);
    expect(r.duplicates).toBe(4);
  });

  it('forgets ids past its horizon and its window', async () => {
    // A file whose second record started two hours before its first (a copy of `a` written after `e`):
    // with a horizon of three hours `a` is still known, with one of an hour it was forgotten once `d`
    // (two hours after it) came out.
    const again = mkdtempSync(join(tmpdir(), 'cacheward-merge-again-'));
    writeFileSync(join(again, 'capture-again.jsonl'), `${records[4]}\n${records[0]}\n`);
    expect((await ids([dir, again], { dedupeMs: 3 * 3_600_000 })).out).toEqual(['a', 'b', 'c', 'd', 'e']);
    expect((await ids([dir, again])).out).toEqual(['a', 'b', 'c', 'd', 'e', 'a']);
    // A window of two ids: `a` is forgotten by then whatever the horizon.
    expect((await ids([dir, again], { dedupeMs: 3 * 3_600_000, dedupeWindow: 2 })).out).toEqual([
      'a',
      'b',
      'c',
      'd',
      'e',
      'a',
    ]);
  });
});
