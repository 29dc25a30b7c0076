import { describe, expect, it } from 'vitest';
import {
  EPHEMERAL,
  EPHEMERAL_1H,
  MODES,
  messagesBody,
  send,
  startSim,
  tokensAt,
  totalTokens,
} from './helpers.js';

const h = await startSim();

describe.each(MODES)('Anthropic cache conformance (%s)', (_mode, stream) => {
  const fresh = () => h.sim.reset();

  it('holds the usage identity: total = input + creation + read', async () => {
    fresh();
    const body = messagesBody(7, 120, { 6: EPHEMERAL });
    const total = totalTokens(body);
    for (let i = 0; i < 2; i++) {
      const u = await send(h.anthropic(), body, stream);
      expect(u.input_tokens + (u.cache_creation_input_tokens ?? 0) + (u.cache_read_input_tokens ?? 0)).toBe(
        total,
      );
    }
  });

  it('writes at a breakpoint, then reads it', async () => {
    fresh();
    const body = messagesBody(5, 150, { 4: EPHEMERAL });
    const at = tokensAt(body, 4);
    const first = await send(h.anthropic(), body, stream);
    expect(first).toMatchObject({
      cache_creation_input_tokens: at,
      cache_read_input_tokens: 0,
      input_tokens: 0,
    });
    const second = await send(h.anthropic(), body, stream);
    expect(second).toMatchObject({ cache_creation_input_tokens: 0, cache_read_input_tokens: at });
  });

  it('follows the documented lookback example: 10 written, 15 hits 10, 35 misses 15', async () => {
    fresh();
    const t1 = messagesBody(11, 60, { 10: EPHEMERAL });
    const u1 = await send(h.anthropic(), t1, stream);
    expect(u1.cache_creation_input_tokens).toBe(tokensAt(t1, 10));
    const t2 = messagesBody(17, 60, { 15: EPHEMERAL });
    const u2 = await send(h.anthropic(), t2, stream);
    expect(u2.cache_read_input_tokens).toBe(tokensAt(t2, 10));
    expect(u2.cache_creation_input_tokens).toBe(tokensAt(t2, 15) - tokensAt(t2, 10));
    const t3 = messagesBody(37, 60, { 35: EPHEMERAL });
    const u3 = await send(h.anthropic(), t3, stream);
    // 35 looks back over 35..16: the entry at 15 is one position too far.
    expect(u3.cache_read_input_tokens).toBe(0);
    expect(u3.cache_creation_input_tokens).toBe(tokensAt(t3, 35));
    // A breakpoint at 34 would have reached it (34..15).
    fresh();
    await send(h.anthropic(), t2, stream);
    const reach = await send(h.anthropic(), messagesBody(37, 60, { 34: EPHEMERAL }), stream);
    expect(reach.cache_read_input_tokens).toBe(tokensAt(t2, 15));
  });

  it('bills mixed TTLs as A / B / C', async () => {
    fresh();
    const warm = messagesBody(9, 200, { 2: EPHEMERAL_1H });
    await send(h.anthropic(), warm, stream);
    const body = messagesBody(9, 200, { 2: EPHEMERAL_1H, 5: EPHEMERAL_1H, 8: EPHEMERAL });
    const a = tokensAt(body, 2);
    const b = tokensAt(body, 5);
    const c = tokensAt(body, 8);
    const u = await send(h.anthropic(), body, stream);
    expect(u.cache_read_input_tokens).toBe(a);
    expect(u.cache_creation?.ephemeral_1h_input_tokens).toBe(b - a);
    expect(u.cache_creation?.ephemeral_5m_input_tokens).toBe(c - b);
    expect(u.cache_creation_input_tokens).toBe(c - a);
    expect(u.input_tokens).toBe(totalTokens(body) - c);
  });

  it.each([
    ['claude-opus-5', 512],
    ['claude-sonnet-5', 1024],
    ['claude-opus-4-7', 2048],
    ['claude-haiku-4-5', 4096],
  ])('caches %s only from %i tokens (just under: nothing; just over: written)', async (model, minimum) => {
    fresh();
    const sized = (tokens: number) => {
      const body = messagesBody(1, tokens, { 0: EPHEMERAL }, model);
      // The filler is 4 characters a token; the block's JSON adds a few: trim to land exactly.
      let t = tokens;
      while (tokensAt(messagesBody(1, t, { 0: EPHEMERAL }, model), 0) > tokens) t--;
      return tokensAt(messagesBody(1, t, { 0: EPHEMERAL }, model), 0) === tokens
        ? messagesBody(1, t, { 0: EPHEMERAL }, model)
        : body;
    };
    const under = sized(minimum - 1);
    const over = sized(minimum);
    expect(tokensAt(under, 0)).toBe(minimum - 1);
    expect(tokensAt(over, 0)).toBe(minimum);
    const u = await send(h.anthropic(), under, stream);
    expect(u).toMatchObject({
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 0,
      input_tokens: minimum - 1,
    });
    const o = await send(h.anthropic(), over, stream);
    expect(o).toMatchObject({ cache_creation_input_tokens: minimum, cache_read_input_tokens: 0 });
  });

  it('expires a 5-minute entry after 5 minutes and a 1-hour entry after an hour', async () => {
    fresh();
    const five = messagesBody(3, 300, { 2: EPHEMERAL });
    await send(h.anthropic(), five, stream);
    h.clock.advance(5 * 60_000 - 1);
    expect((await send(h.anthropic(), five, stream)).cache_read_input_tokens).toBe(tokensAt(five, 2));
    h.clock.advance(5 * 60_000);
    expect((await send(h.anthropic(), five, stream)).cache_read_input_tokens).toBe(0);
    fresh();
    const hour = messagesBody(3, 300, { 2: EPHEMERAL_1H });
    await send(h.anthropic(), hour, stream);
    h.clock.advance(59 * 60_000);
    expect((await send(h.anthropic(), hour, stream)).cache_read_input_tokens).toBe(tokensAt(hour, 2));
    h.clock.advance(60 * 60_000 + 1);
    expect((await send(h.anthropic(), hour, stream)).cache_read_input_tokens).toBe(0);
  });

  it('refreshes an entry on every read', async () => {
    fresh();
    const body = messagesBody(3, 300, { 2: EPHEMERAL });
    await send(h.anthropic(), body, stream);
    for (let i = 0; i < 4; i++) {
      h.clock.advance(4 * 60_000);
      expect((await send(h.anthropic(), body, stream)).cache_read_input_tokens).toBe(tokensAt(body, 2));
    }
    h.clock.advance(5 * 60_000 + 1);
    expect((await send(h.anthropic(), body, stream)).cache_read_input_tokens).toBe(0);
  });

  it('makes two parallel requests both miss: an entry is readable only once its response begins', async () => {
    fresh();
    const body = messagesBody(3, 300, { 2: EPHEMERAL });
    const stall = { 'x-sim-fault': 'stall=150' };
    const [a, b] = await Promise.all([
      send(h.anthropic(), body, stream, stall),
      send(h.anthropic(), body, stream, stall),
    ]);
    expect(a.cache_read_input_tokens).toBe(0);
    expect(b.cache_read_input_tokens).toBe(0);
    expect(a.cache_creation_input_tokens).toBe(tokensAt(body, 2));
    expect(b.cache_creation_input_tokens).toBe(tokensAt(body, 2));
    expect((await send(h.anthropic(), body, stream)).cache_read_input_tokens).toBe(tokensAt(body, 2));
  });

  it('scopes the cache per API key and per model', async () => {
    fresh();
    const body = messagesBody(3, 300, { 2: EPHEMERAL });
    await send(h.anthropic('key-one'), body, stream);
    expect((await send(h.anthropic('key-two'), body, stream)).cache_read_input_tokens).toBe(0);
    expect((await send(h.anthropic('key-one'), body, stream)).cache_read_input_tokens).toBe(
      tokensAt(body, 2),
    );
    const other = { ...body, model: 'claude-fable-5' };
    expect((await send(h.anthropic('key-one'), other, stream)).cache_read_input_tokens).toBe(0);
  });

  it('moves automatic caching forward with the conversation', async () => {
    fresh();
    const auto = (n: number) => ({ ...messagesBody(n, 200), cache_control: EPHEMERAL });
    const u1 = await send(h.anthropic(), auto(3), stream);
    expect(u1.cache_creation_input_tokens).toBe(tokensAt(auto(3), 2));
    const u2 = await send(h.anthropic(), auto(5), stream);
    expect(u2.cache_read_input_tokens).toBe(tokensAt(auto(5), 2));
    expect(u2.cache_creation_input_tokens).toBe(tokensAt(auto(5), 4) - tokensAt(auto(5), 2));
    const u3 = await send(h.anthropic(), auto(7), stream);
    expect(u3.cache_read_input_tokens).toBe(tokensAt(auto(7), 4));
  });

  it('skips blocks that cannot carry a marker when placing the automatic breakpoint', async () => {
    fresh();
    const body = {
      ...messagesBody(3, 200),
      cache_control: EPHEMERAL,
    } as Record<string, unknown>;
    (body.messages as unknown[]).push({
      role: 'assistant',
      content: [{ type: 'thinking', thinking: 'hmm', signature: 'sig' }],
    });
    const u = await send(h.anthropic(), body, stream);
    expect(u.cache_creation_input_tokens).toBe(tokensAt(body, 2));
  });

  it('treats automatic caching on an already marked last block with the same TTL as a no-op', async () => {
    fresh();
    const body = { ...messagesBody(3, 200, { 2: EPHEMERAL }), cache_control: EPHEMERAL };
    const u = await send(h.anthropic(), body, stream);
    expect(u.cache_creation_input_tokens).toBe(tokensAt(body, 2));
  });

  it('leaves deferred tools out of the prefix: adding one later keeps the cache', async () => {
    fresh();
    const tool = (name: string, deferred = false) => ({
      name,
      description: `The ${name} tool.`,
      input_schema: { type: 'object' },
      ...(deferred ? { defer_loading: true } : {}),
    });
    const body = {
      ...messagesBody(3, 300, { 2: EPHEMERAL }),
      tools: [tool('Read'), tool('placeholder', true)],
    };
    await send(h.anthropic(), body, stream);
    const later = { ...body, tools: [tool('Read'), tool('placeholder', true), tool('mcp__db__query', true)] };
    expect((await send(h.anthropic(), later, stream)).cache_read_input_tokens).toBe(tokensAt(body, 3));
  });
});
