// A capture line that parses but is not a whole record (a field missing, or of another type) is skipped with
// a warning naming file, line and field, or read as it is: never a crash, and never a lost neighbour.

import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { PriceTable } from '../../src/analyze/price-table.js';
import { runBustSession } from '../../src/demo/bust-session.js';
import { analyzePaths } from '../../src/report/analyze-paths.js';

let lines: string[];
beforeAll(async () => {
  const dir = (await runBustSession(mkdtempSync(join(tmpdir(), 'cacheward-shape-')))).dir;
  const file = readdirSync(dir).find((n) => n.startsWith('capture-')) as string;
  lines = readFileSync(join(dir, file), 'utf8').split('\n').filter(Boolean);
}, 60_000);

const WRONG: unknown[] = [undefined, null, 5, 'x', [], {}, true];

describe('a capture record with a field missing or of another type', () => {
  it('is skipped or read, never a crash, and the other records are all read', async () => {
    const first = JSON.parse(lines[0] as string) as Record<string, unknown>;
    const keys = [
      ...Object.keys(first).filter((k) => k !== 'v' && k !== 'id'),
      // And a level down, where readers go next.
      'times.firstByte',
      'times.end',
      'session.source',
      'usage.raw',
      'usage.normalized',
      'prefix.params',
      'prefix.folds',
      'prefix.totalTokens',
      'prefix.blocks.0',
      'prefix.blocks.0.hash',
      'prefix.blocks.0.tokens',
      'prefix.blocks.0.level',
      'fixes.0',
    ];
    const whole = await analyzePaths([write(lines)], { prices: new PriceTable() });
    for (const key of keys)
      for (const value of WRONG) {
        // Every record of the file with this one field broken: the first (no delta base) and the rest.
        for (const at of [0, 1]) {
          const broken = lines.map((l, i) => {
            if (i !== at) return l;
            const r = JSON.parse(l) as Record<string, unknown>;
            const path = key.split('.');
            const last = path.pop() as string;
            let node: Record<string, unknown> | undefined = r;
            for (const p of path) node = node?.[p] as Record<string, unknown> | undefined;
            if (node === undefined || node === null || typeof node !== 'object') return l;
            if (value === undefined) delete node[last];
            else node[last] = value;
            return JSON.stringify(r);
          });
          const warnings: string[] = [];
          const result = await analyzePaths([write(broken)], {
            prices: new PriceTable(),
            onWarning: (w) => warnings.push(w),
          });
          // The broken one is read or skipped (with a warning naming its line); no other is lost.
          expect(result.generatedFrom.records, `${key}=${JSON.stringify(value)}`).toBeGreaterThanOrEqual(
            whole.generatedFrom.records - 1,
          );
          if (result.generatedFrom.records < whole.generatedFrom.records)
            expect(warnings.join('\n')).toMatch(new RegExp(`:${at + 1}: skipped`));
        }
      }
  }, 120_000);
});

function write(content: string[]): string {
  const dir = mkdtempSync(join(tmpdir(), 'cacheward-shape-file-'));
  writeFileSync(join(dir, 'capture-20261206T000000-1-0001.jsonl'), `${content.join('\n')}\n`);
  return dir;
}
