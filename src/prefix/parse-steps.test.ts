// PrefixBuilder.parseSteps and scanJsonSteps build exactly what the one-step parse builds, in bounded pieces.
// Pure: no event loop is involved.

import { describe, expect, it } from 'vitest';
import { drainSteps, STEP_ITEMS } from '../core/steps.js';
import { scanJson, scanJsonSteps } from '../wire/json-scan.js';
import { type Prefix, PrefixBuilder } from './build-prefix.js';

/** A body of `n` short messages after a tool and a system prompt. */
function hugeBody(n: number, extra = 0): Buffer {
  const messages = Array.from({ length: n + extra }, (_, i) => ({
    role: i % 2 ? 'assistant' : 'user',
    content: [{ type: 'text', text: `message ${i} ${'x'.repeat(i % 7)}` }],
  }));
  return Buffer.from(
    JSON.stringify({
      model: 'claude-opus-5',
      max_tokens: 8,
      system: 'You are a coding agent.',
      tools: [{ name: 'Read', description: 'Reads.', input_schema: { type: 'object' } }],
      messages,
    }),
  );
}

/** Runs a stepped computation, calling `between` after every piece; returns its value and piece count. */
function run<T>(steps: Generator<void, T>, between: () => void = () => {}): { value: T; pieces: number } {
  let pieces = 0;
  for (;;) {
    const r = steps.next();
    pieces++;
    if (r.done) return { value: r.value, pieces };
    between();
  }
}

const identities = (p: Prefix) =>
  p.blocks.map((b) => [b.index, b.level, b.kind, b.contentHash, b.hash, b.cumulativeTokens, b.transcript]);

describe('PrefixBuilder.parseSteps', () => {
  const N = 6_000;
  const options = { format: 'anthropic-messages' as const };

  it('cuts a huge body into bounded pieces and builds exactly what parse builds', () => {
    const body = hugeBody(N);
    const { value, pieces } = run(new PrefixBuilder().parseSteps(body, options));
    // The scan, the unit list, the unit reading and the block loop each yield every STEP_ITEMS items.
    expect(pieces).toBeGreaterThan((3 * N) / STEP_ITEMS);
    const whole = new PrefixBuilder().parse(body, options);
    expect(value.blocks.length).toBe(N + 2);
    expect(identities(value)).toEqual(identities(whole));
    expect(value.levels).toEqual(whole.levels);
    expect(value.totalTokens).toBe(whole.totalTokens);
  });

  it('gives the same blocks when other parses on the same builder run between its pieces', () => {
    const first = hugeBody(N);
    const next = hugeBody(N, 2);
    const builder = new PrefixBuilder();
    builder.parse(first, options);
    // The next turn extends the kept body; meanwhile other conversations' bodies go through the builder.
    let k = 0;
    const { value } = run(builder.parseSteps(next, options), () => {
      if (k++ % 5 === 0) builder.parse(hugeBody(40 + (k % 3)), options);
    });
    const alone = new PrefixBuilder();
    alone.parse(first, options);
    expect(identities(value)).toEqual(identities(alone.parse(next, options)));
    expect(identities(value)).toEqual(identities(new PrefixBuilder().parse(next, options)));
  });

  it('throws the precise error of parse from the piece that finds it', () => {
    const bad = Buffer.from(`${hugeBody(2_000).toString().slice(0, -3)}x]}`);
    expect(() => new PrefixBuilder().parse(bad, options)).toThrow(/./);
    let message = '';
    try {
      new PrefixBuilder().parse(bad, options);
    } catch (err) {
      message = (err as Error).message;
    }
    expect(() => run(new PrefixBuilder().parseSteps(bad, options))).toThrow(message);
  });
});

describe('scanJsonSteps', () => {
  it('scans whitespace, escapes and repeated keys into the nodes scanJson makes', () => {
    const shape = { members: { messages: { items: { members: { content: {} } } } } };
    const texts = [
      '{"messages":[{"content":"a"},{"content":"b\\u0041"}],"messages":[]}',
      ' { "messages" : [ {"content":1} ,{"content":"\\/"} ] , "x" : {"y":[1,2]} } ',
      `{"messages":[${Array.from({ length: 1_000 }, (_, i) => `{"content":"m${i}"}`).join(',')}]}`,
    ];
    for (const t of texts) {
      const bytes = Buffer.from(t);
      const stepped = run(scanJsonSteps(bytes, shape)).value;
      expect(stepped).toEqual(scanJson(bytes, shape));
      expect(drainSteps(scanJsonSteps(bytes, shape))).toEqual(stepped);
    }
  });
});
