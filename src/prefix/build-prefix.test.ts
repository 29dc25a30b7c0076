// The prefix model on Anthropic and OpenAI bodies: block order, identities, spans, folded parameters.
// Pure: bodies in memory, nothing sent.

import { describe, expect, it } from 'vitest';
import { anthropicFixture, openaiChatFixture, openaiResponsesFixture } from '../../test/fixtures/requests.js';
import { agentConversation, appendUserTurn } from '../sim/agent-conversation.js';
import { KEPT_BODIES, PrefixBuilder, parsePrefix } from './build-prefix.js';
import { firstDivergence } from './first-divergence.js';

const json = (v: unknown) => JSON.stringify(v);

describe('buildPrefix (Anthropic)', () => {
  const p = parsePrefix(json(anthropicFixture()), {
    headers: { 'anthropic-beta': 'mid-conversation-tool-changes-2026-07-01' },
  });

  it('orders blocks tools → system → messages and leaves deferred tools out', () => {
    expect(p.blocks.map((b) => b.level)).toEqual([
      'tools',
      'tools',
      'tools',
      'system',
      'system',
      'messages',
      'messages',
      'messages',
      'messages',
      'messages',
      'messages',
      'messages',
      'messages',
    ]);
    expect(p.blocks.filter((b) => b.level === 'tools').map((b) => b.name)).toEqual([
      'get_weather',
      'read_file',
      'tool_search_tool_regex',
    ]);
    expect(p.deferredTools).toEqual(['mcp__db__query']);
    expect(p.levels.tools.params.defer_loading).toBe(true);
  });

  it('gives every block its kind, message position, span, tokens and marker', () => {
    const kinds = p.blocks
      .filter((b) => b.level === 'messages')
      .map((b) => `${b.messageIndex}.${b.partIndex}:${b.role}:${b.kind}`);
    expect(kinds).toEqual([
      '0.0:user:text',
      '1.0:assistant:thinking',
      '1.1:assistant:tool_use',
      '2.0:user:tool_result',
      '2.1:user:image',
      '3.0:system:text',
      '4.0:assistant:text',
      '5.0:user:text',
    ]);
    const toolUse = p.blocks.find((b) => b.kind === 'tool_use');
    expect(toolUse?.name).toBe('get_weather');
    expect(p.blocks[1]?.cacheControl).toEqual({ type: 'ephemeral' });
    expect(p.blocks[4]?.cacheControl).toEqual({ type: 'ephemeral', ttl: '1h' });
    let sum = 0;
    for (const b of p.blocks) {
      expect(b.tokens).toBeGreaterThan(0);
      sum += b.tokens;
      expect(b.cumulativeTokens).toBe(sum);
      expect(b.span.end).toBeGreaterThan(b.span.start);
    }
    expect(p.totalTokens).toBe(sum);
    expect(p.blocks.find((b) => b.kind === 'image')?.tokens).toBeGreaterThanOrEqual(1600);
  });

  it('folds messages-level parameters: thinking, images, betas', () => {
    expect(p.levels.messages.params).toEqual({
      thinking: { type: 'enabled', budget_tokens: 4000 },
      images: true,
      'anthropic-beta': ['mid-conversation-tool-changes-2026-07-01'],
    });
    expect(p.levels.tools.params).toMatchObject({ model: 'claude-opus-5', format: 'anthropic-messages' });
  });

  it.each([
    ['model', { model: 'claude-sonnet-5' }, 'tools'],
    ['speed', { speed: 'fast' }, 'system'],
    ['tool_choice', { tool_choice: { type: 'any' } }, 'messages'],
    ['thinking', { thinking: { type: 'enabled', budget_tokens: 9000 } }, 'messages'],
    ['effort', { output_config: { effort: 'low' } }, 'messages'],
    ['context_management', { context_management: { edits: [] } }, 'messages'],
    ['output_format', { output_config: { format: { type: 'json_schema', schema: {} } } }, 'messages'],
  ])('a change of %s invalidates the %s level', (name, patch, level) => {
    const changed = parsePrefix(json({ ...anthropicFixture(), ...patch }));
    const base = parsePrefix(json(anthropicFixture()));
    const d = firstDivergence(base, changed);
    expect(d?.level).toBe('params');
    expect(d?.change).toMatchObject({ type: 'params', invalidates: level, params: [{ name }] });
    expect(d?.blockIndex).toBe(base.levels[level as 'tools'].start);
  });

  it('finds an image nested in a tool_result, and none in a tool_result with string content', () => {
    const png = 'A'.repeat(600);
    const body = (content: unknown) =>
      json({
        model: 'claude-opus-5',
        max_tokens: 5,
        messages: [
          { role: 'user', content: 'go' },
          { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'shot', input: {} }] },
          { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content }] },
        ],
      });
    const nested = parsePrefix(
      body([{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: png } }]),
    );
    expect(nested.levels.messages.params.images).toBe(true);
    expect(nested.blocks.at(-1)?.tokens).toBeGreaterThanOrEqual(1600);
    const text = parsePrefix(body('"type":"image" is only text here'));
    expect(text.levels.messages.params.images).toBeUndefined();
  });

  it('treats an explicit default effort as omitted', () => {
    const a = parsePrefix(json(anthropicFixture()));
    const b = parsePrefix(json({ ...anthropicFixture(), output_config: { effort: 'high' } }));
    expect(firstDivergence(a, b)).toBeNull();
  });

  it('keeps key order significant in block identity', () => {
    const a = anthropicFixture();
    const b = anthropicFixture();
    const tool = (b.tools as Array<Record<string, unknown>>)[0] as Record<string, unknown>;
    (b.tools as unknown[])[0] = {
      description: tool.description,
      name: tool.name,
      input_schema: tool.input_schema,
    };
    const d = firstDivergence(parsePrefix(json(a)), parsePrefix(json(b)));
    expect(d?.level).toBe('tools');
    expect(d?.change).toMatchObject({ type: 'tools', otherChanged: ['get_weather'] });
  });

  it('does not hash a deferred tool: adding one when another is already deferred changes nothing', () => {
    const a = anthropicFixture();
    const b = anthropicFixture();
    (b.tools as unknown[]).push({
      name: 'late',
      description: 'x',
      input_schema: { type: 'object' },
      defer_loading: true,
    });
    expect(firstDivergence(parsePrefix(json(a)), parsePrefix(json(b)))).toBeNull();
  });
});

describe('buildPrefix (OpenAI)', () => {
  it('folds Chat parameters at the tools level, prompt_cache_key included', () => {
    const p = parsePrefix(json(openaiChatFixture()));
    expect(p.format).toBe('openai-chat');
    expect(p.levels.tools.params).toMatchObject({
      model: 'gpt-5.4',
      prompt_cache_key: 'session-42',
      parallel_tool_calls: false,
    });
    expect(p.blocks.map((b) => b.kind)).toEqual([
      'tool',
      'text',
      'text',
      'image_url',
      'tool_call',
      'text',
      'text',
    ]);
    const q = parsePrefix(json({ ...openaiChatFixture(), prompt_cache_key: 'other' }));
    expect(firstDivergence(p, q)?.change).toMatchObject({
      type: 'params',
      params: [{ name: 'prompt_cache_key' }],
    });
  });

  it('puts Responses instructions at the system level and items in order', () => {
    const p = parsePrefix(json(openaiResponsesFixture()));
    expect(p.blocks.map((b) => `${b.level}:${b.kind}`)).toEqual([
      'tools:tool',
      'system:text',
      'messages:input_text',
      'messages:reasoning',
      'messages:function_call',
      'messages:function_call_output',
      'messages:input_text',
    ]);
    expect(p.levels.tools.params).toMatchObject({ 'reasoning.effort': 'medium', 'text.verbosity': 'low' });
  });

  it('treats string content and a single text part as the same prompt', () => {
    const a = openaiChatFixture();
    const b = openaiChatFixture();
    (b.messages as Array<{ content: unknown }>)[4] = {
      role: 'user',
      content: [{ type: 'text', text: 'And tomorrow?' }],
    } as never;
    expect(firstDivergence(parsePrefix(json(a)), parsePrefix(json(b)))).toBeNull();
  });
});

describe('PrefixBuilder memo', () => {
  it('computes only the new blocks of a request that extends an earlier one', () => {
    const builder = new PrefixBuilder();
    const a = agentConversation({ turns: 20 });
    builder.parse(json(a));
    const before = { ...builder.units.stats };
    const b = appendUserTurn(a, 'next');
    const pb = builder.parse(json(b));
    const computed = builder.units.stats.computed - before.computed;
    // Two new blocks are computed. The block that lost its marker changed bytes but kept its identity:
    // found in memory. Every other block is byte-identical at the same position: reused without hashing.
    expect(computed).toBe(2);
    expect(builder.units.stats.remembered - before.remembered).toBe(1);
    expect(builder.units.stats.reused - before.reused).toBe(pb.blocks.length - 3);
  });

  it('reuses units shifted by an insertion, alternating between a client body and its forwarded one', () => {
    const builder = new PrefixBuilder({ memoEntries: 1 });
    const a = agentConversation({ turns: 20 });
    const withPlaceholder = (b: typeof a) => ({
      ...b,
      tools: [...(b.tools as object[]), { name: 'x', description: 'd', input_schema: { type: 'object' } }],
    });
    builder.parse(json(a));
    builder.parse(json(withPlaceholder(a)));
    const b = appendUserTurn(a, 'next');
    const before = { ...builder.units.stats };
    const pb = builder.parse(json(b));
    const pf = builder.parse(json(withPlaceholder(b)));
    // The client's body reads its two new blocks and the one that lost its marker; the forwarded one
    // (every unit after the inserted tool shifted by one) finds all of its units in the bodies before.
    const read = builder.units.stats.computed + builder.units.stats.remembered;
    const readBefore = before.computed + before.remembered;
    expect(read - readBefore).toBe(3);
    expect(builder.units.stats.reused - before.reused).toBe(pb.blocks.length + pf.blocks.length - 3);
    expect(pf.blocks.map((x) => x.contentHash)).toEqual(
      new PrefixBuilder().parse(json(withPlaceholder(b))).blocks.map((x) => x.contentHash),
    );
  });

  it('evicts the oldest units past its limit', () => {
    const builder = new PrefixBuilder({ memoEntries: 5 });
    const a = json(agentConversation({ turns: 3 }));
    builder.parse(a);
    builder.parse(json(agentConversation({ turns: 3, seed: 7 })));
    // A third body, so `a` (a string: not ranked against the kept bodies) is not one of the two newest
    // the builder searches.
    builder.parse(json(agentConversation({ turns: 3, seed: 8 })));
    const before = builder.units.stats.computed;
    builder.parse(a);
    expect(builder.units.stats.computed).toBeGreaterThan(before);
    const roomy = new PrefixBuilder();
    roomy.parse(a);
    roomy.parse(json(agentConversation({ turns: 3, seed: 7 })));
    roomy.parse(json(agentConversation({ turns: 3, seed: 8 })));
    const kept = roomy.units.stats.computed;
    roomy.parse(a);
    expect(roomy.units.stats.computed).toBe(kept);
  });

  it.each([0, 1, 2, 3, 5, 17])('rejects a raw control character in a compact block (offset %i)', (pad) => {
    const text = `${'x'.repeat(pad)}a\u0001b${'y'.repeat(40)}`;
    const raw = `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"${text}"}]}]}`;
    expect(() => new PrefixBuilder().parse(raw)).toThrow(/control character/);
    expect(() => new PrefixBuilder().parse(raw.replace('\u0001', ' '))).not.toThrow();
  });

  it('uses a pluggable estimator', () => {
    const builder = new PrefixBuilder({ estimateTokens: ({ text }) => text().length });
    const p = builder.parse('{"model":"m","messages":[{"role":"user","content":"hello"}]}');
    expect(p.blocks[0]?.tokens).toBe(JSON.stringify({ type: 'text', text: 'hello' }).length);
  });
});

describe('PrefixBuilder extend path', () => {
  it('builds, from the blocks it takes over, exactly the prefix a fresh builder builds', () => {
    const builder = new PrefixBuilder();
    let body = agentConversation({ turns: 6 });
    const bodies: object[] = [];
    for (let t = 0; t < 6; t++) {
      body = appendUserTurn(body, `turn ${t}`);
      bodies.push(body);
      // A forwarded twin: one more tool in front shifts every later unit.
      bodies.push({ ...body, tools: [...(body.tools as object[]), { name: 'p', input_schema: {} }] });
    }
    // An edit in the middle, a parameter that folds in at the messages level, a new system prompt.
    const edited = structuredClone(body) as { messages: Array<{ content: unknown }>; system: unknown };
    edited.messages[3] = { role: 'user', content: 'rewritten' } as never;
    bodies.push(
      edited,
      { ...body, thinking: { type: 'enabled', budget_tokens: 2048 } },
      { ...body, system: 'x' },
    );
    bodies.push(body);
    for (const b of bodies) {
      const got = builder.parse(json(b));
      const want = new PrefixBuilder().parse(json(b));
      expect(got.blocks).toEqual(want.blocks);
      expect(got.levels).toEqual(want.levels);
      expect(got.totalTokens).toBe(want.totalTokens);
    }
  });

  it('hands over the very block objects of an unchanged leading part', () => {
    const builder = new PrefixBuilder();
    const a = agentConversation({ turns: 8 });
    const pa = builder.parse(json(a));
    const pb = builder.parse(json(appendUserTurn(a, 'next')));
    // All but the last block of `a` (its marker moved) are the same objects.
    const kept = pb.blocks.filter((b, i) => b === pa.blocks[i]).length;
    expect(kept).toBe(pa.blocks.length - 1);
  });
});

describe('PrefixBuilder kept bodies', () => {
  const bytes = (v: unknown) => Buffer.from(json(v));

  it('extends each of many interleaved conversations from its own previous body', () => {
    // Kept bodies enough for 24 interleaved conversations (the default keeps a few: see KEPT_BODIES).
    const builder = new PrefixBuilder({ keep: { bodies: 64, bytes: 32 * 1024 * 1024 } });
    const convs = Array.from({ length: 24 }, (_, i) => agentConversation({ turns: 4, seed: 100 + i }));
    const last = convs.map((c) => builder.parse(bytes(c)));
    for (let round = 0; round < 3; round++) {
      for (let i = 0; i < convs.length; i++) {
        const next = appendUserTurn(convs[i] as (typeof convs)[number], `round ${round} of ${i}`);
        convs[i] = next;
        const before = { ...builder.units.stats };
        const got = builder.parse(bytes(next));
        // Only the new turn and the block that lost its marker are read (hashed); every other unit is
        // reused by a byte compare, and the leading blocks are the previous prefix's very objects.
        const read = (x: typeof before) => x.computed + x.remembered;
        expect(read(builder.units.stats) - read(before)).toBeLessThanOrEqual(3);
        expect(builder.units.stats.reused - before.reused).toBeGreaterThanOrEqual(got.blocks.length - 3);
        const prev = last[i] as (typeof last)[number];
        expect(got.blocks.filter((b, k) => b === prev.blocks[k]).length).toBe(prev.blocks.length - 1);
        expect(got.blocks).toEqual(new PrefixBuilder().parse(bytes(next)).blocks);
        last[i] = got;
      }
    }
  });

  it('does not take another conversation with the same tools and system for this one', () => {
    const builder = new PrefixBuilder();
    const base = agentConversation({ turns: 6, seed: 1 });
    const other = { ...base, messages: (agentConversation({ turns: 6, seed: 2 }) as typeof base).messages };
    const pa = builder.parse(bytes(base));
    const pb = builder.parse(bytes(other));
    // The other conversation shares the leading blocks (tools, system) and nothing after them.
    const lead = pa.blocks.filter((b) => b.level !== 'messages').length;
    expect(pb.blocks.slice(0, lead).every((b, k) => b.hash === pa.blocks[k]?.hash)).toBe(true);
    expect(pb.blocks[lead]?.hash).not.toBe(pa.blocks[lead]?.hash);
    // Its next request, with the other one parsed last, extends from its own body.
    const next = appendUserTurn(base, 'next');
    const got = builder.parse(bytes(next));
    expect(got.blocks.filter((b, k) => b === pa.blocks[k]).length).toBe(pa.blocks.length - 1);
    expect(got.blocks).toEqual(new PrefixBuilder().parse(bytes(next)).blocks);
    const fresh = { ...base, messages: (agentConversation({ turns: 3, seed: 3 }) as typeof base).messages };
    expect(builder.parse(bytes(fresh)).blocks).toEqual(new PrefixBuilder().parse(bytes(fresh)).blocks);
  });

  it('keeps one place per conversation: a request that extends its previous one supersedes it', () => {
    const builder = new PrefixBuilder();
    let conv = agentConversation({ turns: 4, seed: 7 });
    builder.parse(bytes(conv));
    for (let i = 0; i < 10; i++) {
      conv = appendUserTurn(conv, `turn ${i}`);
      builder.parse(bytes(conv));
    }
    // Eleven turns of one conversation take one place, not eleven (the list would fill with old turns).
    expect(builder.keptSize().bodies).toBe(1);
    const other = agentConversation({ turns: 4, seed: 8 });
    builder.parse(bytes(other));
    expect(builder.keptSize().bodies).toBe(2);
    // An older turn resent (a retry, a fork) still extends from what is kept, with the same blocks.
    const older = appendUserTurn(agentConversation({ turns: 4, seed: 7 }), 'turn 0');
    expect(builder.parse(bytes(older)).blocks).toEqual(new PrefixBuilder().parse(bytes(older)).blocks);
  });

  it('keeps at most its bound of bodies and bytes, and always the newest two', () => {
    const bodies = Array.from({ length: 12 }, (_, i) => bytes(agentConversation({ turns: 2, seed: i })));
    const size = bodies[0]?.length ?? 0;
    const byCount = new PrefixBuilder({ keep: { bodies: 5 } });
    for (const b of bodies) byCount.parse(b);
    expect(byCount.keptSize().bodies).toBe(5);
    const byBytes = new PrefixBuilder({ keep: { bytes: size * 3.5 } });
    for (const b of bodies) byBytes.parse(b);
    expect(byBytes.keptSize().bodies).toBe(3);
    expect(byBytes.keptSize().bytes).toBeLessThanOrEqual(size * 3.5);
    const tiny = new PrefixBuilder({ keep: { bytes: 1 } });
    for (const b of bodies) tiny.parse(b);
    expect(tiny.keptSize().bodies).toBe(2);
    // A resent body replaces its twin.
    const again = new PrefixBuilder();
    for (let i = 0; i < 5; i++) again.parse(bytes(agentConversation({ turns: 2, seed: 0 })));
    expect(again.keptSize()).toEqual({ bodies: 1, bytes: size });
    const defaults = new PrefixBuilder();
    for (let i = 0; i < 70; i++) defaults.parse(bytes(agentConversation({ turns: 1, seed: 1000 + i })));
    expect(defaults.keptSize().bodies).toBe(KEPT_BODIES);
    defaults.forget();
    expect(defaults.keptSize()).toEqual({ bodies: 0, bytes: 0 });
  });
});
