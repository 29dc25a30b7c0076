// The cause table, one test per cause and per provider scheme, on evidence from the real cache models over
// real request bodies at chosen times (Anthropic; OpenAI automatic with 128 and 2,048 rounding; GPT-5.6+).
import { describe, expect, it } from 'vitest';
import { AnthropicCache } from '../cache/anthropic-cache.js';
import type { CacheEvidence } from '../cache/cache-evidence.js';
import { OpenAICache } from '../cache/openai-cache.js';
import type { Relation } from '../conversation/conversation-store.js';
import { type Prefix, PrefixBuilder } from '../prefix/build-prefix.js';
import { firstDivergence } from '../prefix/first-divergence.js';
import { agentConversation, anthropicTool, appendUserTurn } from '../sim/agent-conversation.js';
import { type CauseDecision, decideCause } from './cause-table.js';

type Json = Record<string, unknown>;
const MIN = 60_000;

/** One request as the cache model saw it: what it read, wrote and left cached, and its evidence. */
interface Sent {
  prefix: Prefix;
  start: number;
  firstByte: number;
  read: number;
  written: number;
  evidence: CacheEvidence;
}

/** A provider's cache with a clock in the test's hands; the model's own usage stands for the provider's. */
function provider(kind: 'anthropic' | 'openai') {
  const anthropic = new AnthropicCache();
  const openai = new OpenAICache();
  const builder = new PrefixBuilder();
  let n = 0;
  return {
    send(
      body: Json,
      start: number,
      opts: { respondAt?: number; mode?: string; retention?: string } = {},
    ): Sent {
      const id = `r${++n}`;
      const firstByte = opts.respondAt ?? start + 100;
      if (kind === 'anthropic') {
        const prefix = builder.parse(JSON.stringify(body), { format: 'anthropic-messages' });
        const out = anthropic.evaluate(prefix, 'k', start, id, { explain: true });
        if (!('usage' in out)) throw new Error(out.message);
        anthropic.responseBegan(out, firstByte);
        const u = out.usage;
        return {
          prefix,
          start,
          firstByte,
          read: u.cache_read_input_tokens,
          written: u.cache_creation_input_tokens,
          evidence: out.evidence,
        };
      }
      const prefix = builder.parse(JSON.stringify(body), { format: 'openai-chat' });
      const out = openai.evaluate(prefix, 'k', start, id, {
        explain: true,
        ...(opts.mode ? { mode: opts.mode } : {}),
        ...(opts.retention ? { retention: opts.retention } : {}),
      });
      openai.responseBegan(out, firstByte);
      return {
        prefix,
        start,
        firstByte,
        read: out.cachedTokens,
        written: out.cacheWriteTokens ?? 0,
        evidence: out.evidence,
      };
    },
  };
}

/** What the parent left cached: the provider's word where writes are reported, else the model's. */
const cachedBy = (p: Sent) =>
  p.evidence.writesReported ? p.read + p.written : Math.max(p.read, p.evidence.cachedAfterTokens);

/** The table's decision for `child` against `parent` (as the analyzer assembles it). */
function decide(
  parent: Sent | undefined,
  child: Sent,
  relation: Relation = parent ? 'continues' : 'new',
  read = child.read,
): CauseDecision | undefined {
  const divergence = parent ? firstDivergence(parent.prefix, child.prefix) : null;
  return decideCause({
    relation,
    hasParent: !!parent,
    parentCached: parent ? cachedBy(parent) : 0,
    divergence,
    shared: divergence
      ? divergence.sharedTokens
      : Math.min(parent?.prefix.totalTokens ?? 0, child.prefix.totalTokens),
    read,
    written: child.written,
    total: child.prefix.totalTokens,
    evidence: child.evidence,
    beforeParentResponse: !!parent && child.start < parent.firstByte,
    idleSeconds: parent ? (child.start - parent.start) / 1000 : 0,
  });
}

const TOOLS = ['Bash', 'Glob', 'Grep', 'Read', 'Edit', 'Write'];
const base = () => agentConversation({ turns: 4, tools: TOOLS, seed: 7 });

describe('cause table: Anthropic', () => {
  it('cold_start for a first write, nothing for the turn that reads it all', () => {
    const p = provider('anthropic');
    const t1 = p.send(base(), 0);
    expect(decide(undefined, t1)?.cause).toBe('cold_start');
    const t2 = p.send(appendUserTurn(base(), 'next'), 30_000);
    expect(decide(t1, t2)).toBeUndefined();
  });

  const changed: Array<[string, (b: Json) => void, string]> = [
    ['tools_changed', (b) => (b.tools as Json[]).splice(2, 0, anthropicTool('mcp__db__query')), 'tools'],
    ['tools_changed', (b) => (b.tools as Json[]).pop(), 'tools'],
    [
      'system_changed',
      (b) => {
        const s = (b.system as Json[])[0] as Json;
        s.text = `${s.text}\nCurrent date: 2026-12-01.`;
      },
      'system',
    ],
    [
      'messages_edited',
      (b) => (((b.messages as Json[])[2] as Json).content = [{ type: 'text', text: 'edited' }]),
      'messages',
    ],
    ['params_changed', (b) => (b.tool_choice = { type: 'any' }), 'params'],
    ['model_changed', (b) => (b.model = 'claude-fable-5'), 'params'],
  ];
  it("messages_edited, not unexplained, when the parent's last message (its breakpoint) was edited", () => {
    const p = provider('anthropic');
    const first = appendUserTurn(base(), 'first question');
    const t1 = p.send(first, 0);
    // The next request ends the same history with another question: every block but the parent's last is
    // shared, and the parent's only message entry was at that last block.
    const t2 = p.send(appendUserTurn(base(), 'another question'), 30_000);
    const d = decide(t1, t2);
    expect(t2.read).toBeLessThan(cachedBy(t1) / 2);
    expect(d?.cause).toBe('messages_edited');
    expect(d?.blockIndex).toBe(t1.prefix.blocks.length - 1);
  });

  it.each(changed)('%s when the prefix changed at its level', (cause, edit, level) => {
    const p = provider('anthropic');
    const t1 = p.send(base(), 0);
    const b = appendUserTurn(base(), 'next');
    edit(b);
    const t2 = p.send(b, 30_000);
    const d = decide(t1, t2);
    expect(d?.cause).toBe(cause);
    expect(d?.changed?.[0]).toBe(level);
    expect(d?.rewritten).toBeGreaterThan(0);
  });

  it('fork_diverged when a fork sends a prefix its parent never cached', () => {
    const p = provider('anthropic');
    const t1 = p.send(base(), 0);
    const b = appendUserTurn(base(), 'review');
    (b.tools as Json[]).push(anthropicTool('skill_manage'));
    expect(decide(t1, p.send(b, 30_000), 'fork')?.cause).toBe('fork_diverged');
  });

  it('ttl_expired with the TTL of the entry that expired (1 h system, 5 m conversation, idle 10 min)', () => {
    const p = provider('anthropic');
    const mixed = (b: Json) => {
      ((b.system as Json[])[0] as Json).cache_control = { type: 'ephemeral', ttl: '1h' };
      return b;
    };
    const t1 = p.send(mixed(base()), 0);
    const t2 = p.send(mixed(appendUserTurn(base(), 'back')), 10 * MIN);
    expect(t2.read).toBeGreaterThan(0); // the 1 h system entry is still there
    const d = decide(t1, t2);
    expect(d?.cause).toBe('ttl_expired');
    expect(d?.evidence).toMatchObject({ reason: 'expired', ttlMs: 5 * MIN });
  });

  it('lookback_exceeded when one turn adds more than 20 blocks behind the moving breakpoint', () => {
    const p = provider('anthropic');
    const t1 = p.send(base(), 0);
    let b = base();
    for (let i = 0; i < 11; i++) b = appendUserTurn(b, `step ${i}`);
    const d = decide(t1, p.send(b, 30_000));
    expect(d?.cause).toBe('lookback_exceeded');
    expect(d?.evidence).toMatchObject({ reason: 'beyond_lookback' });
  });

  it('concurrent when the request starts before its parent’s response began', () => {
    const p = provider('anthropic');
    const t1 = p.send(base(), 0, { respondAt: 5_000 });
    const d = decide(t1, p.send(base(), 1_000));
    expect(d?.cause).toBe('concurrent');
    expect(d?.evidence).toMatchObject({ reason: 'pending' });
  });

  it('below_minimum when the prefix is smaller than the model caches', () => {
    const p = provider('anthropic');
    const small = {
      model: 'claude-haiku-4-5',
      max_tokens: 10,
      cache_control: { type: 'ephemeral' },
      messages: [{ role: 'user', content: 'Classify: the build is red.' }],
    };
    const t1 = p.send(small, 0);
    expect(decide(undefined, t1)).toMatchObject({ cause: 'below_minimum', evidence: { minimum: 4096 } });
    const grown = {
      ...small,
      messages: [...small.messages, { role: 'assistant', content: 'bug' }, { role: 'user', content: 'next' }],
    };
    expect(decide(t1, p.send(grown, 30_000))?.cause).toBe('below_minimum');
  });

  it("unexplained for a conversation's first request when another's entry was readable and none was read", () => {
    const p = provider('anthropic');
    p.send(base(), 0);
    // The same prefix started again (a fork into a new session): the model finds the entry, the provider
    // read nothing.
    const again = p.send(base(), 30_000);
    expect(again.evidence?.readTokens).toBeGreaterThan(1000);
    const d = decide(undefined, again, 'new', 0);
    expect(d).toMatchObject({ cause: 'unexplained', rewritten: again.evidence?.readTokens });
    // Read as the model said: a warm start, no miss.
    expect(decide(undefined, again, 'new')).toBeUndefined();
  });

  it('unexplained only when the model could read more than the provider did', () => {
    const p = provider('anthropic');
    const t1 = p.send(base(), 0);
    const t2 = p.send(appendUserTurn(base(), 'next'), 30_000);
    expect(decide(t1, t2, 'continues', 0)?.cause).toBe('unexplained');
  });

  // prompt-caching.md, "Caching with thinking blocks": "On earlier Opus/Sonnet models and all Haiku models,
  // cache gets invalidated when non-tool-result user content is added, causing all previous thinking
  // blocks to be stripped from context." "On Opus 4.5+ and Sonnet 4.6+, thinking blocks are preserved".
  const thinkingTurns = (model: string): [Json, Json] => {
    const words = 'alpha bravo charlie delta echo foxtrot golf hotel '.repeat(400);
    const marker = { type: 'ephemeral' };
    const loop: Json = {
      model,
      max_tokens: 64,
      tools: [anthropicTool('weather')],
      thinking: { type: 'enabled', budget_tokens: 2048 },
      messages: [
        { role: 'user', content: `What's the weather in Paris? ${words}` },
        {
          role: 'assistant',
          content: [
            { type: 'thinking', thinking: words.slice(0, 1200), signature: 's1' },
            { type: 'tool_use', id: 'toolu_1', name: 'weather', input: { city: 'Paris' } },
          ],
        },
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: 'toolu_1', content: '15 degrees', cache_control: marker },
          ],
        },
      ],
    };
    const next = structuredClone(loop);
    (next.messages as Json[]).push(
      { role: 'assistant', content: [{ type: 'text', text: 'It is 15 degrees.' }] },
      { role: 'user', content: [{ type: 'text', text: 'And tomorrow?', cache_control: marker }] },
    );
    return [loop, next];
  };

  it.each(['claude-opus-4-1', 'claude-haiku-4-5', 'claude-sonnet-4-5'])(
    'thinking_stripped when new user text makes %s drop the thinking its parent cached',
    (model) => {
      const p = provider('anthropic');
      const [loop, next] = thinkingTurns(model);
      const t1 = p.send(loop, 0);
      expect(t1.written).toBeGreaterThan(0);
      const t2 = p.send(next, 30_000);
      const d = decide(t1, t2);
      expect(d?.cause).toBe('thinking_stripped');
      expect(d?.evidence).toMatchObject({ reason: 'thinking_stripped', blocks: 1 });
      // Everything the parent cached past the first thinking block is lost.
      expect(d?.rewritten).toBe(cachedBy(t1) - t2.read);
    },
  );

  it.each(['claude-opus-4-5', 'claude-sonnet-4-6', 'claude-opus-5'])(
    'no miss on %s, which keeps thinking',
    (model) => {
      const p = provider('anthropic');
      const [loop, next] = thinkingTurns(model);
      const t1 = p.send(loop, 0);
      const t2 = p.send(next, 30_000);
      expect(t2.evidence.unreadable.find((u) => u.reason === 'thinking_stripped')).toBeUndefined();
      expect(decide(t1, t2)).toBeUndefined();
    },
  );

  it('another cause still wins over stripped thinking: a request sent before its parent answered', () => {
    const p = provider('anthropic');
    const [loop, next] = thinkingTurns('claude-opus-4-1');
    const t1 = p.send(loop, 0, { respondAt: 5_000 });
    expect(decide(t1, p.send(next, 1_000))?.cause).toBe('concurrent');
  });
});

/** An OpenAI Chat body: a long developer prompt, then `turns` user/assistant pairs and a user message. */
function chat(model: string, turns: number, extra: Json = {}): Json {
  const filler = (n: number, seed: number) =>
    Array.from({ length: n }, (_, i) => `word${(i * 7 + seed) % 97}`).join(' ');
  const messages: Json[] = [{ role: 'developer', content: filler(1200, 1) }];
  for (let t = 0; t < turns; t++)
    messages.push(
      { role: 'user', content: filler(150, t + 2) },
      { role: 'assistant', content: filler(60, t + 50) },
    );
  messages.push({ role: 'user', content: filler(150, 99 + turns) });
  return { model, messages, ...extra };
}

describe.each([
  ['gpt-5.4', 128],
  ['gpt-5.5', 2048],
])(
  'cause table: OpenAI automatic caching (%s, %i-token rounding, writes not reported)',
  (model, granularity) => {
    it('names nothing when a turn loses only the rounding', () => {
      const p = provider('openai');
      const t1 = p.send(chat(model, 2), 0);
      expect(decide(undefined, t1)?.cause).toBe('cold_start');
      const t2 = p.send(chat(model, 3), 30_000);
      expect(t2.read % granularity).toBe(0);
      expect(decide(t1, t2)).toBeUndefined();
    });

    it('tools_changed on turn 2, from what the model inferred the first turn cached', () => {
      const p = provider('openai');
      const tools = [{ type: 'function', function: { name: 'read', parameters: { type: 'object' } } }];
      const t1 = p.send(chat(model, 2, { tools }), 0);
      const t2 = p.send(
        chat(model, 3, { tools: [...tools, { type: 'function', function: { name: 'write' } }] }),
        30_000,
      );
      expect(t1.written).toBe(0);
      expect(decide(t1, t2)?.cause).toBe('tools_changed');
    });

    it('messages_edited when an earlier message changed', () => {
      const p = provider('openai');
      const t1 = p.send(chat(model, 4), 0);
      const b = chat(model, 5);
      ((b.messages as Json[])[3] as Json).content = 'edited';
      expect(decide(t1, p.send(b, 30_000))?.cause).toBe('messages_edited');
    });

    it('ttl_expired after 5 idle minutes in memory; nothing with 24 h retention', () => {
      const p = provider('openai');
      const t1 = p.send(chat(model, 3), 0);
      const d = decide(t1, p.send(chat(model, 4), 6 * MIN));
      expect(d).toMatchObject({ cause: 'ttl_expired', evidence: { reason: 'expired', ttlMs: 5 * MIN } });
      const q = provider('openai');
      const k1 = q.send(chat(model, 3), 0, { retention: '24h' });
      expect(decide(k1, q.send(chat(model, 4), 60 * MIN, { retention: '24h' }))).toBeUndefined();
    });

    it('concurrent for a parallel duplicate, which the model infers its twin was still writing', () => {
      const p = provider('openai');
      p.send(chat(model, 3), 0);
      const a = p.send(chat(model, 4, { n: 1 }), 30_000, { respondAt: 40_000 });
      const b = p.send(chat(model, 4, { n: 1 }), 30_500);
      expect(decide(a, b)).toMatchObject({ cause: 'concurrent', evidence: { reason: 'pending' } });
    });

    it('nothing for a fork that reads its parent while a sibling is still writing past the parent', () => {
      // The main line and a summary fork both extend the parent with the same reply; the main line's
      // entries past the parent are still pending when the fork looks up. The fork lost nothing of its parent.
      const p = provider('openai');
      const parent = p.send(chat(model, 3), 0);
      const shared = (last: string) => {
        const b = chat(model, 4);
        ((b.messages as Json[]).at(-1) as Json).content = last;
        return b;
      };
      p.send(shared('next step'), 30_000, { respondAt: 40_000 });
      const fork = p.send(shared('Summarize the session.'), 30_500);
      expect(fork.evidence.unreadable[0]).toMatchObject({ reason: 'pending' });
      expect(decide(parent, fork, 'fork')).toBeUndefined();
    });

    it('nothing when what the fork lost of its parent is only the rounding, a sibling writing just past it', () => {
      const p = provider('openai');
      const parent = p.send(chat(model, 3), 0);
      const next = (last: string) => {
        const b = chat(model, 3);
        (b.messages as Json[]).push({ role: 'assistant', content: 'Done.' }, { role: 'user', content: last });
        return b;
      };
      p.send(next('next step'), 30_000, { respondAt: 40_000 });
      const fork = p.send(next('Summarize.'), 30_500);
      expect(decide(parent, fork, 'fork')).toBeUndefined();
    });
  },
);

describe('cause table: GPT-5.6+ breakpoints (writes reported, 30-minute TTL)', () => {
  it('nothing after 10 idle minutes; ttl_expired after 31, with the 30-minute TTL', () => {
    const p = provider('openai');
    const t1 = p.send(chat('gpt-5.6', 3), 0);
    expect(t1.written).toBeGreaterThan(0);
    const t2 = p.send(chat('gpt-5.6', 4), 10 * MIN);
    expect(decide(t1, t2)).toBeUndefined();
    const d = decide(t2, p.send(chat('gpt-5.6', 5), 41 * MIN + 1));
    expect(d).toMatchObject({ cause: 'ttl_expired', evidence: { ttlMs: 30 * MIN } });
  });

  it('lookback_exceeded when more than 20 eligible message ends come in one turn', () => {
    const p = provider('openai');
    const t1 = p.send(chat('gpt-5.6', 2), 0);
    const d = decide(t1, p.send(chat('gpt-5.6', 24), 30_000));
    expect(d).toMatchObject({ cause: 'lookback_exceeded', evidence: { reason: 'beyond_lookback' } });
  });

  it('explicit mode without breakpoints caches nothing, and so names nothing', () => {
    const p = provider('openai');
    const t1 = p.send(chat('gpt-5.6', 2), 0, { mode: 'explicit' });
    expect(t1.written).toBe(0);
    expect(decide(undefined, t1)).toBeUndefined();
    expect(decide(t1, p.send(chat('gpt-5.6', 3), 30_000, { mode: 'explicit' }))).toBeUndefined();
  });

  it('names nothing for a request with no input at all (an empty warm-up), below the minimum as it is', () => {
    const p = provider('openai');
    const empty = p.send({ model: 'gpt-5.6', messages: [] }, 0);
    expect(empty.prefix.totalTokens).toBe(0);
    expect(empty.evidence?.unreadable.some((u) => u.reason === 'below_minimum')).toBe(true);
    expect(decide(undefined, empty)).toBeUndefined();
  });

  it('below_minimum under 1,024 tokens', () => {
    const p = provider('openai');
    const tiny = { model: 'gpt-5.6', messages: [{ role: 'user', content: 'hello there' }] };
    expect(decide(undefined, p.send(tiny, 0))).toMatchObject({
      cause: 'below_minimum',
      evidence: { minimum: 1024 },
    });
  });
});
