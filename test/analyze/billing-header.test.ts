// Claude Code's billing line is outside the cache key on the Anthropic API (observed behaviour, see
// docs/SPEC-caching.md): the prefix model, `cacheward diff`, the simulator and the report all agree.

import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PriceTable } from '../../src/analyze/price-table.js';
import { PrefixBuilder } from '../../src/prefix/build-prefix.js';
import { comparePrefixes } from '../../src/prefix/first-divergence.js';
import { analyzePaths } from '../../src/report/analyze-paths.js';
import { cli } from '../cli/run-cli.js';
import { startProxy } from '../proxy/helpers.js';
import { filler } from '../sim/helpers.js';

type Json = Record<string, unknown>;
const line = (cch: string) =>
  `x-anthropic-billing-header: cc_version=2.1.14.e3f; cc_entrypoint=cli; cch=${cch};`;

/** A Claude Code-shaped request: the billing line first, then the cached system prompt and the history. */
function claudeCode(cch: string, turns = 1, system: unknown[] | undefined = undefined): Json {
  const messages: Json[] = [];
  for (let i = 0; i < turns; i++) {
    messages.push({ role: 'user', content: [{ type: 'text', text: filler(300, i) }] });
    if (i < turns - 1) messages.push({ role: 'assistant', content: [{ type: 'text', text: `done ${i}` }] });
  }
  const last = messages[messages.length - 1] as { content: Json[] };
  last.content[0] = { ...(last.content[0] as Json), cache_control: { type: 'ephemeral' } };
  return {
    model: 'claude-opus-5',
    max_tokens: 32,
    system: system ?? [
      { type: 'text', text: line(cch) },
      { type: 'text', text: `You are Claude Code. ${filler(900, 7)}`, cache_control: { type: 'ephemeral' } },
    ],
    messages,
  };
}

const parse = (body: Json) =>
  new PrefixBuilder().parse(JSON.stringify(body), { format: 'anthropic-messages' });

describe('the prefix model leaves the billing line out of blocks, keys and tokens', () => {
  it('gives two requests that differ only in the billing line the same keys, and records where it is', () => {
    const a = parse(claudeCode('a1b2c'));
    const b = parse(claudeCode('ffff0'));
    expect(a.blocks.map((x) => x.hash)).toEqual(b.blocks.map((x) => x.hash));
    expect(comparePrefixes(a, b).divergence).toBeNull();
    expect(a.blocks.filter((x) => x.level === 'system')).toHaveLength(1);
    expect(a.blocks.find((x) => x.level === 'system')?.partIndex).toBe(1);
    const text = a.body.bytes.toString('utf8', a.billingHeader?.start, a.billingHeader?.end);
    expect(JSON.parse(text)).toEqual({ type: 'text', text: line('a1b2c') });
    // The same body without the line at all has the same prefix.
    const none = parse(claudeCode('x', 1, [(claudeCode('x').system as Json[])[1]]));
    expect(none.blocks.map((x) => x.hash)).toEqual(a.blocks.map((x) => x.hash));
    expect(none.billingHeader).toBeUndefined();
  });

  it.each([
    ['a string system prompt that starts with it', line('1')],
    [
      'a billing line that is not the first block',
      [
        { type: 'text', text: 'hi' },
        { type: 'text', text: line('1') },
      ],
    ],
    [
      'a first block that only mentions it',
      [
        { type: 'text', text: `see ${line('1')}` },
        { type: 'text', text: 'x' },
      ],
    ],
  ])('never takes %s for it', (_name, system) => {
    const p = parse({ ...claudeCode('1'), system });
    expect(p.billingHeader).toBeUndefined();
    const count = typeof system === 'string' ? 1 : system.length;
    expect(p.blocks.filter((x) => x.level === 'system')).toHaveLength(count);
  });

  it('leaves OpenAI bodies alone', () => {
    const body = {
      model: 'gpt-5.4',
      messages: [
        { role: 'system', content: line('1') },
        { role: 'user', content: 'x' },
      ],
    };
    const p = new PrefixBuilder().parse(JSON.stringify(body), { format: 'openai-chat' });
    expect(p.billingHeader).toBeUndefined();
    expect(p.blocks).toHaveLength(2);
  });

  it('says so in `cacheward diff` (exit 0: the prefixes agree)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cacheward-billing-'));
    writeFileSync(join(dir, 'a.json'), JSON.stringify(claudeCode('a1b2c')));
    writeFileSync(join(dir, 'b.json'), JSON.stringify(claudeCode('ffff0')));
    const r = await cli(['diff', join(dir, 'a.json'), join(dir, 'b.json')]);
    expect(r.code).toBe(0);
  });
});

describe('the report agrees with the simulator', () => {
  it('finds no miss in a Claude Code session whose billing line changes every turn', async () => {
    const h = await startProxy();
    const client = h.anthropic();
    const usages = [];
    for (let turn = 1; turn <= 4; turn++) {
      const msg = await client.messages.create(claudeCode(`c${turn}`, turn) as never);
      usages.push(msg.usage);
      h.clock.advance(10_000);
    }
    // The simulator read everything before each turn's new message.
    for (const u of usages.slice(1)) expect(u.cache_read_input_tokens).toBeGreaterThan(0);
    await h.proxy.flush();
    const result = await analyzePaths([h.dir], { prices: new PriceTable() });
    expect(result.requests).toHaveLength(4);
    expect(result.misses.filter((m) => m.cause !== 'cold_start')).toEqual([]);
  });
});
