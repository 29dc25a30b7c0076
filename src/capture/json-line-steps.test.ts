// Stepped JSON lines are exactly JSON.stringify's, in bounded steps, and the writer writes large records whole.
// Writes only into its own temporary folders.

import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { VirtualClock } from '../core/clock.js';
import { drainSteps, STEP_ITEMS } from '../core/steps.js';
import type { CapturedBlock, CaptureRecord } from '../record/capture-record.js';
import { storeBody } from './body-delta.js';
import { CaptureWriter } from './capture-writer.js';
import { jsonLineSteps } from './json-line-steps.js';

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** A hashes-mode record of `n` message blocks (no usage: the writer stores it as it is). */
function bigRecord(n: number): CaptureRecord {
  const blocks: CapturedBlock[] = Array.from({ length: n }, (_, i) => ({
    level: 'messages',
    index: i,
    kind: 'text',
    message: i,
    part: 0,
    role: i % 2 ? 'assistant' : 'user',
    hash: `h${i.toString(16).padStart(31, '0')}`,
    id: `i${i.toString(16).padStart(31, '0')}`,
    size: 40 + (i % 7),
    tokens: 10 + (i % 3),
    at: i * 50,
    ...(i % 1000 === 999 ? { cc: { type: 'ephemeral', ttl: '1h' } } : {}),
  }));
  return {
    v: 1,
    id: 'r1',
    times: { start: 1, end: 2 },
    session: { key: 's', source: 'header' },
    provider: 'anthropic',
    route: '/v1/messages',
    method: 'POST',
    outcome: 'complete',
    stream: false,
    headers: { 'user-agent': 'test "quoted" \u2028 agent' },
    betas: [],
    requestBytes: n * 50,
    prefix: {
      format: 'anthropic-messages',
      totalTokens: n * 11,
      blocks,
      params: { tools: {}, system: { x: undefined }, messages: { temperature: 0.5 } },
      folds: { tools: 't', system: 's', messages: 'm' },
    },
    fixes: [],
  };
}

/** Text whose 64 K pieces fall inside surrogate pairs and escapes: emoji, quotes, control characters. */
function trickyText(chars: number): string {
  const parts = ['a', '😀', '"', '\\', '\n', '\u0001', 'é', '\u2028', '𝄞'];
  let s = '';
  for (let i = 0; s.length < chars; i++) s += parts[i % parts.length];
  return s;
}

const text = (p: { pieces: Buffer[] }) => Buffer.concat(p.pieces).toString('utf8');

describe('jsonLineSteps', () => {
  it('gives exactly JSON.stringify plus a newline, whatever the value', () => {
    const values: unknown[] = [
      bigRecord(3_000),
      { a: undefined, b: () => 1, c: [undefined, () => 2, Symbol('x'), null, 1.5, -0], d: { e: { f: [1] } } },
      { date: new Date(0), nested: { buffer: Buffer.from('hi') }, body: { text: trickyText(300_000) } },
      [trickyText(200_001), 'short', [[['deep']]]],
      Object.assign(Object.create(null), { z: 1, a: 2 }),
      { toJSON: () => ({ replaced: true }) },
      'plain',
      42,
      null,
    ];
    for (const v of values) expect(text(drainSteps(jsonLineSteps(v)))).toBe(`${JSON.stringify(v)}\n`);
  });

  it('does a bounded amount of work per step: a few hundred blocks, never the whole record', () => {
    const record = bigRecord(50_000);
    const steps = jsonLineSteps(record);
    let yields = 0;
    let r = steps.next();
    while (!r.done) {
      yields++;
      r = steps.next();
    }
    // One step per STEP_ITEMS pieces written (a block is a piece, and so is each comma between two).
    expect(yields).toBeGreaterThanOrEqual(50_000 / STEP_ITEMS);
    expect(text(r.value)).toBe(`${JSON.stringify(record)}\n`);
    expect(r.value.bytes).toBe(Buffer.byteLength(`${JSON.stringify(record)}\n`));
  });
});

describe('the capture writer with large records', () => {
  it('writes a large hashes record and a large full body exactly as one JSON.stringify would', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cacheward-line-'));
    dirs.push(dir);
    for (const mode of ['hashes', 'full'] as const) {
      const folder = join(dir, mode);
      const writer = new CaptureWriter({ dir: folder, mode, clock: new VirtualClock() });
      const record = bigRecord(20_000);
      const body = Buffer.from(JSON.stringify({ messages: [trickyText(1_500_000)] }));
      writer.write(record, { forwarded: body });
      await writer.close();
      const files = readdirSync(folder);
      expect(files).toHaveLength(1);
      const line = readFileSync(join(folder, files[0] as string), 'utf8');
      const expected = mode === 'full' ? { ...record, body: storeBody(body) } : record;
      expect(line).toBe(`${JSON.stringify(expected)}\n`);
    }
  });
});
