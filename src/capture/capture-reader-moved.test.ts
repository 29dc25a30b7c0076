// The capture reader puts blocks that moved in the body back at their offsets, and says what it cannot read.
// Writes only into its own temporary folder.

import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { bareRecord } from '../../test/fixtures/capture-records.js';
import { parsePrefix } from '../prefix/build-prefix.js';
import { type CapturedBlock, capturePrefix, sameBlockMoved } from '../record/capture-record.js';
import { readCaptures } from './capture-reader.js';

/** A record line of session `s` with the given prefix (only what the reader needs). */
function line(id: string, prefix: Record<string, unknown>): string {
  const params = { tools: {}, system: {}, messages: {} };
  return JSON.stringify({
    ...bareRecord(id),
    prefix: { format: 'anthropic-messages', totalTokens: 30, params, ...prefix },
  });
}

const block = (i: number, at: number) => ({
  level: i < 2 ? 'tools' : 'messages',
  index: i,
  kind: 'text',
  hash: `h${i}`,
  id: `i${i}`,
  size: 10,
  tokens: 3,
  at,
});

describe('readCaptures: blocks that moved in the body', () => {
  it('puts shared blocks back at their base offset plus each run’s delta', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cacheward-moved-'));
    const base = [block(0, 500), block(1, 510), block(2, 20)];
    writeFileSync(
      join(dir, 'capture-a.jsonl'),
      `${[
        line('r1', { blocks: base }),
        line('r2', { base: { id: 'r1', shared: 3, moved: [[0, 2, 40]] }, blocks: [block(3, 60)] }),
      ].join('\n')}\n`,
    );
    const out = [];
    for await (const r of readCaptures([dir])) out.push(r.record.prefix?.blocks.map((b) => b.at));
    expect(out).toEqual([
      [500, 510, 20],
      [540, 550, 20, 60],
    ]);
  });

  it('names the file and line of runs it cannot read, and keeps the base offsets', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cacheward-moved-'));
    const file = join(dir, 'capture-b.jsonl');
    writeFileSync(
      file,
      `${[
        line('r1', { blocks: [block(0, 500)] }),
        line('r2', { base: { id: 'r1', shared: 1, moved: [[0, 'x', 40]] }, blocks: [] }),
      ].join('\n')}\n`,
    );
    const warnings: string[] = [];
    const out = [];
    for await (const r of readCaptures([dir], { onWarning: (m) => warnings.push(m) }))
      out.push(r.record.prefix?.blocks.map((b) => b.at));
    expect(out).toEqual([[500], [500]]);
    expect(warnings).toEqual([
      `${file}:2: the moved blocks of r2 are not [first, count, delta] runs; their offsets are the base's`,
    ]);
  });

  it('never takes a block whose part number changed for one that only moved', () => {
    // Claude Code's billing line is left out of every block and key but counts in the system's parts.
    const body = (billing: boolean) =>
      JSON.stringify({
        model: 'claude-opus-5',
        max_tokens: 16,
        messages: [{ role: 'user', content: 'hi' }],
        system: [
          ...(billing
            ? [{ type: 'text', text: 'x-anthropic-billing-header: cc_version=2.1.1; cch=abc;' }]
            : []),
          { type: 'text', text: 'You are careful.' },
        ],
      });
    const system = (billing: boolean) =>
      capturePrefix(parsePrefix(body(billing), { format: 'anthropic-messages' })).blocks.find(
        (b) => b.level === 'system',
      ) as CapturedBlock;
    const [a, b] = [system(true), system(false)];
    expect(a.hash).toBe(b.hash);
    expect(a.part).not.toBe(b.part);
    expect(sameBlockMoved(a, b)).toBe(false);
    expect(sameBlockMoved(a, { ...a, at: a.at + 7 })).toBe(true);
  });
});
