// Properties of the one first-divergence engine: no divergence from itself, the exact block of an edit.
// Pure: generated bodies only (fast-check).

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { bustExamples } from '../demo/bust-examples.js';
import { agentConversation, anthropicTool, appendUserTurn } from '../sim/agent-conversation.js';
import { type Prefix, parsePrefix } from './build-prefix.js';
import { describeDivergence } from './describe-divergence.js';
import { firstDivergence } from './first-divergence.js';

type Json = Record<string, unknown>;
type Msg = { role: string; content: string | Json[] };

const text = fc.string({ minLength: 1, maxLength: 40, unit: 'grapheme' });
const textBlock = text.map((t) => ({ type: 'text', text: t }));
const content = fc.oneof(text, fc.array(textBlock, { minLength: 1, maxLength: 3 }));
const toolNames = fc.uniqueArray(fc.stringMatching(/^[a-z][a-z_]{0,11}$/), { minLength: 1, maxLength: 8 });

/** An arbitrary Anthropic request: unique tools, system blocks, alternating messages. */
const anthropicRequest = fc
  .record({
    tools: toolNames,
    descriptions: fc.array(text, { minLength: 8, maxLength: 8 }),
    system: fc.array(text, { minLength: 0, maxLength: 3 }),
    messages: fc.array(content, { minLength: 1, maxLength: 8 }),
  })
  .map(({ tools, descriptions, system, messages }) => ({
    model: 'claude-opus-5',
    max_tokens: 100,
    tools: tools.map((name, i) => ({ name, description: descriptions[i], input_schema: { type: 'object' } })),
    system: system.map((t) => ({ type: 'text', text: t })),
    messages: messages.map((c, i) => ({ role: i % 2 === 0 ? 'user' : 'assistant', content: c })),
  }));

const prefix = (body: unknown, space?: number): Prefix => parsePrefix(JSON.stringify(body, null, space));

/** Every block-bearing object of a body, in prefix order, with a function that edits it. */
function editors(body: Json): Array<() => void> {
  const out: Array<() => void> = [];
  for (const tool of body.tools as Json[]) out.push(() => (tool.description = `${tool.description}!`));
  for (const block of body.system as Json[]) out.push(() => (block.text = `${block.text}!`));
  for (const m of body.messages as Msg[]) {
    if (typeof m.content === 'string') out.push(() => (m.content = `${m.content}!`));
    else for (const b of m.content) out.push(() => (b.text = `${b.text}!`));
  }
  return out;
}

/** Moves markers around: strips all, then marks the given block positions; also flips string/array forms. */
function remark(body: Json, seed: number): Json {
  const copy = structuredClone(body);
  let n = seed;
  for (const m of copy.messages as Msg[]) {
    if (typeof m.content === 'string' && n % 2 === 0) m.content = [{ type: 'text', text: m.content }];
    else if (Array.isArray(m.content) && m.content.length === 1 && n % 3 === 0)
      m.content = m.content[0]?.text as string;
    if (Array.isArray(m.content))
      for (const b of m.content) if (n++ % 3 === 0) b.cache_control = { type: 'ephemeral' };
  }
  for (const t of copy.tools as Json[]) if (n++ % 4 === 0) t.cache_control = { type: 'ephemeral', ttl: '1h' };
  return copy;
}

describe('firstDivergence properties', () => {
  it('a request never diverges from itself, a re-indented copy, or a copy with markers moved', () => {
    fc.assert(
      fc.property(anthropicRequest, fc.nat(100), (body, seed) => {
        const a = prefix(body);
        expect(firstDivergence(a, prefix(body))).toBeNull();
        expect(firstDivergence(a, prefix(body, 2))).toBeNull();
        expect(firstDivergence(a, prefix(remark(body, seed), 1))).toBeNull();
      }),
      { numRuns: 150 },
    );
  });

  it('appending messages or blocks never diverges before the old end', () => {
    fc.assert(
      fc.property(anthropicRequest, fc.array(content, { minLength: 1, maxLength: 4 }), (body, extra) => {
        const longer = structuredClone(body);
        const msgs = longer.messages as Msg[];
        for (const c of extra) msgs.push({ role: msgs.length % 2 === 0 ? 'user' : 'assistant', content: c });
        expect(firstDivergence(prefix(body), prefix(longer))).toBeNull();
        const grown = structuredClone(body);
        const last = (grown.messages as Msg[]).at(-1) as Msg;
        last.content =
          typeof last.content === 'string' ? [{ type: 'text', text: last.content }] : last.content;
        (last.content as Json[]).push({ type: 'text', text: 'appended' });
        expect(firstDivergence(prefix(body), prefix(grown))).toBeNull();
      }),
      { numRuns: 150 },
    );
  });

  it('any single-block edit is found at exactly that block', () => {
    fc.assert(
      fc.property(anthropicRequest, fc.nat(), (body, pick) => {
        const a = prefix(body);
        const edited = structuredClone(body);
        const edits = editors(edited);
        const k = pick % edits.length;
        edits[k]?.();
        const d = firstDivergence(a, prefix(edited));
        expect(d).not.toBeNull();
        expect(d?.blockIndex).toBe(k);
        expect(d?.level).toBe(a.blocks[k]?.level);
        if (d?.change.type === 'tools') expect(d.change.descriptionChanged).toEqual([a.blocks[k]?.name]);
        if (d?.change.type === 'messages' || d?.change.type === 'system')
          expect(d.change.edit).toBe('edited');
      }),
      { numRuns: 200 },
    );
  });

  it('reordering two tools reports the first moved index with both names', () => {
    fc.assert(
      fc.property(
        anthropicRequest.filter((b) => (b.tools as unknown[]).length >= 2),
        fc.nat(),
        fc.nat(),
        (body, x, y) => {
          const n = (body.tools as unknown[]).length;
          const i = x % n;
          let j = y % n;
          if (j === i) j = (i + 1) % n;
          const [lo, hi] = i < j ? [i, j] : [j, i];
          const swapped = structuredClone(body);
          const tools = swapped.tools as Json[];
          [tools[lo], tools[hi]] = [tools[hi] as Json, tools[lo] as Json];
          const d = firstDivergence(prefix(body), prefix(swapped));
          expect(d?.level).toBe('tools');
          expect(d?.blockIndex).toBe(lo);
          expect(d?.change).toMatchObject({
            type: 'tools',
            reordered: [{ index: lo, moved: tools[lo]?.name, displaced: tools[hi]?.name }],
            added: [],
            removed: [],
          });
        },
      ),
      { numRuns: 150 },
    );
  });
});

describe('firstDivergence classification', () => {
  const base = agentConversation({ turns: 6 });

  it('names an inserted tool and the tool it went in front of, with byte offsets and tokens', () => {
    const b = structuredClone(base);
    (b.tools as Json[]).splice(4, 0, anthropicTool('mcp__db__query'));
    const pa = prefix(base);
    const pb = prefix(b);
    const d = firstDivergence(pa, pb);
    expect(d?.change).toMatchObject({
      type: 'tools',
      added: [{ name: 'mcp__db__query', index: 4, before: 'Edit' }],
    });
    expect(d?.byteOffset.a).toBe(pa.blocks[4]?.span.start);
    expect(d?.byteOffset.b).toBe(pb.blocks[4]?.span.start);
    expect(d?.sharedTokens).toBe(pa.blocks[3]?.cumulativeTokens);
    expect(d?.lostTokens).toBe(pb.totalTokens - (d?.sharedTokens ?? 0));
    expect(describeDivergence(d as never)).toMatch(
      /^tools diverge at index 4: `mcp__db__query` was inserted before `Edit`; [\d,]+ tokens after it must be re-written$/,
    );
  });

  it('names a removed tool and a changed schema', () => {
    const b = structuredClone(base);
    const tools = b.tools as Json[];
    tools.splice(2, 1);
    (tools[0] as Json).input_schema = { type: 'object', properties: {} };
    const d = firstDivergence(prefix(base), prefix(b));
    expect(d?.blockIndex).toBe(0);
    expect(d?.change).toMatchObject({
      type: 'tools',
      removed: [{ name: 'Grep', index: 2 }],
      schemaChanged: ['Bash'],
    });
  });

  it('names a tool listed twice as added (it does not crash on duplicated names)', () => {
    const b = structuredClone(base);
    const tools = b.tools as Json[];
    tools.push(structuredClone(tools[1] as Json));
    const d = firstDivergence(prefix(base), prefix(b));
    const name = (tools[1] as Json).name;
    expect(d?.change).toMatchObject({
      type: 'tools',
      added: [{ name, index: tools.length - 1 }],
      removed: [],
    });
    // And the other way round: the duplicate dropped is a removal.
    expect(firstDivergence(prefix(b), prefix(base))?.change).toMatchObject({
      type: 'tools',
      removed: [{ name, index: tools.length - 1 }],
      added: [],
      reordered: [],
    });
  });

  it('tells inserted, removed and restructured messages apart', () => {
    const next = appendUserTurn(base, 'go');
    const ins = structuredClone(next);
    (ins.messages as Msg[]).splice(
      3,
      0,
      { role: 'user', content: 'inserted' },
      { role: 'assistant', content: 'ok' },
    );
    expect(firstDivergence(prefix(next), prefix(ins))?.change).toMatchObject({
      type: 'messages',
      edit: 'inserted',
      messageIndex: 3,
      count: 2,
    });
    const rem = structuredClone(next);
    (rem.messages as Msg[]).splice(3, 2);
    expect(firstDivergence(prefix(next), prefix(rem))?.change).toMatchObject({
      type: 'messages',
      edit: 'removed',
      messageIndex: 3,
      count: 2,
    });
  });

  it('says nothing diverged when a later request is a prefix of an earlier one', () => {
    expect(firstDivergence(prefix(appendUserTurn(base, 'x')), prefix(base))).toBeNull();
  });
});

describe('bundled bust examples', () => {
  it.each(bustExamples().map((e) => [e.id, e] as const))('%s behaves as documented', (_id, ex) => {
    const d = firstDivergence(prefix(ex.a), prefix(ex.b));
    expect(d === null ? 'agrees' : 'diverges').toBe(ex.expect);
  });

  it('Claude Code: a marked array system message and the same text as a string are one prefix', () => {
    const ex = bustExamples().find((e) => e.id === 'system-message-string-vs-array');
    expect(ex).toBeDefined();
    const a = prefix(ex?.a);
    const b = prefix(ex?.b);
    const i = a.blocks.findIndex((blk) => blk.role === 'system');
    expect(i).toBeGreaterThan(0);
    expect(b.blocks[i]?.hash).toBe(a.blocks[i]?.hash);
  });
});

describe('a system prompt sent as leading system/developer messages', () => {
  const chat = (system: string, first: string, extra: Json = {}) =>
    parsePrefix(
      JSON.stringify({
        model: 'gpt-5.6',
        messages: [
          { role: 'system', content: 'You are a coding agent.' },
          { role: 'developer', content: system },
          { role: 'user', content: first },
          { role: 'assistant', content: 'ok' },
          { role: 'user', content: 'next' },
        ],
        ...extra,
      }),
      { format: 'openai-chat' },
    );
  const responses = (system: string, first: string) =>
    parsePrefix(
      JSON.stringify({
        model: 'gpt-5.6',
        input: [
          { role: 'developer', content: system },
          { role: 'user', content: first },
        ],
      }),
      { format: 'openai-responses' },
    );

  it('is the system level in OpenAI Chat and Responses: an edit of it names the system, the rest is messages', () => {
    const d = firstDivergence(chat('Be brief.', 'fix it'), chat('Be brief. Today is Monday.', 'fix it'));
    expect(d).toMatchObject({
      level: 'system',
      change: { type: 'system', edit: 'edited', partIndex: 1, messageIndex: 1, role: 'developer' },
    });
    expect(d?.changed).toEqual(['system']);
    expect(describeDivergence(d as NonNullable<typeof d>)).toMatch(
      /^system diverges at block 1 \(developer message 1\): a text block was edited;/,
    );
    const r = firstDivergence(responses('Be brief.', 'fix it'), responses('Be terse.', 'fix it'));
    expect(r).toMatchObject({
      level: 'system',
      change: { type: 'system', edit: 'edited', role: 'developer' },
    });
    // The conversation after it is the messages level, as before.
    const m = firstDivergence(chat('Be brief.', 'fix it'), chat('Be brief.', 'fix it now'));
    expect(m).toMatchObject({
      level: 'messages',
      change: { type: 'messages', messageIndex: 2, role: 'user' },
    });
  });

  it('keeps the cache key: only the name and the level reported change', () => {
    const a = chat('Be brief.', 'fix it');
    const b = chat('Be brief. Today is Monday.', 'fix it');
    const d = firstDivergence(a, b);
    expect(d?.blockIndex).toBe(b.levels.messages.start + 1);
    expect(b.blocks[d?.blockIndex ?? 0]?.level).toBe('messages');
    // A developer message added in front of the prompt, or one removed, is a system change too.
    const added = parsePrefix(
      JSON.stringify({
        model: 'gpt-5.6',
        messages: [
          { role: 'developer', content: 'New rule.' },
          ...JSON.parse(a.body.bytes.toString()).messages,
        ],
      }),
      { format: 'openai-chat' },
    );
    expect(firstDivergence(a, added)).toMatchObject({ level: 'system', change: { type: 'system' } });
  });
});
