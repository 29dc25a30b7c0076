import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { VirtualClock } from '../../src/core/clock.js';
import { BackgroundForks, ForkRefusedError, validateReply } from '../../src/fork/background-forks.js';
import { ForkParityError, forkRequest, verifyForkParity } from '../../src/fork/fork-request.js';
import { agentConversation } from '../../src/sim/agent-conversation.js';
import { createSimulator } from '../../src/sim/simulator.js';

type Json = Record<string, unknown>;

/** A fetch that keeps the bodies the SDK sends, then answers from the simulator. */
function recording() {
  const sim = createSimulator({ clock: new VirtualClock() });
  const sent: string[] = [];
  const fetch = async (input: string | URL | Request, init?: RequestInit) => {
    if (typeof init?.body === 'string') sent.push(init.body);
    return sim.fetch(input, init);
  };
  return { sim, sent, fetch };
}

function expectParity(parentRaw: string, forkRaw: string, listKey: 'messages' | 'input') {
  const parent = JSON.parse(parentRaw) as Json;
  const fork = JSON.parse(forkRaw) as Json;
  for (const k of new Set([...Object.keys(parent), ...Object.keys(fork)])) {
    if (k === listKey) continue;
    expect(JSON.stringify(fork[k]), `field ${k}`).toBe(JSON.stringify(parent[k]));
  }
  const pm = parent[listKey] as unknown[];
  const fm = fork[listKey] as unknown[];
  expect(fm.length).toBeGreaterThan(pm.length);
  // The parent's messages are a byte-identical prefix of the fork's.
  const pText = JSON.stringify(pm).slice(0, -1);
  expect(JSON.stringify(fm).startsWith(pText)).toBe(true);
}

describe('forkRequest on the wire, through the official SDKs', () => {
  it.each([false, true])(
    'Anthropic (stream %s): same fields, parent messages a prefix, and the fork reads the parent cache',
    async (stream) => {
      const r = recording();
      const client = new Anthropic({
        apiKey: 'k',
        baseURL: 'http://sim.invalid',
        fetch: r.fetch,
        maxRetries: 0,
      });
      const body = {
        ...agentConversation({ turns: 4 }),
        thinking: { type: 'enabled', budget_tokens: 2048 },
        tool_choice: { type: 'auto' },
        metadata: { user_id: 'u' },
      } as Json;
      const headers = { 'anthropic-beta': 'context-management-2025-06-27' };
      const parent = stream
        ? await client.messages.stream(body as never, { headers }).finalMessage()
        : await client.messages.create(body as never, { headers });
      const fork = forkRequest(
        { format: 'anthropic-messages', body, headers, reply: parent.content },
        'Review the above.',
        { requireParity: true },
      );
      expect(fork.headers).toEqual(headers);
      const forked = stream
        ? await client.messages.stream(fork.body as never, { headers: fork.headers }).finalMessage()
        : await client.messages.create(fork.body as never, { headers: fork.headers });
      expectParity(r.sent[0] as string, r.sent[1] as string, 'messages');
      const parentCached =
        (parent.usage.cache_read_input_tokens ?? 0) + (parent.usage.cache_creation_input_tokens ?? 0);
      expect((forked.usage.cache_read_input_tokens ?? 0) / parentCached).toBeGreaterThanOrEqual(0.95);
    },
  );

  it('OpenAI Chat and Responses: same fields, parent items a prefix', async () => {
    const r = recording();
    const client = new OpenAI({
      apiKey: 'k',
      baseURL: 'http://sim.invalid/v1',
      fetch: r.fetch as never,
      maxRetries: 0,
    });
    const chat: Json = {
      model: 'gpt-5.4',
      prompt_cache_key: 'sess-1',
      reasoning_effort: 'low',
      tools: [{ type: 'function', function: { name: 'get', parameters: { type: 'object' } } }],
      messages: [
        { role: 'developer', content: 'x'.repeat(5000) },
        { role: 'user', content: 'hi' },
      ],
    };
    const parent = await client.chat.completions.create(chat as never);
    const fork = forkRequest(
      { format: 'openai-chat', body: chat, reply: parent.choices[0]?.message },
      'Summarize.',
      { requireParity: true },
    );
    await client.chat.completions.create(fork.body as never);
    expectParity(r.sent[0] as string, r.sent[1] as string, 'messages');
    const resp: Json = {
      model: 'gpt-5.6',
      instructions: 'y'.repeat(5000),
      prompt_cache_key: 'sess-2',
      reasoning: { effort: 'medium' },
      input: [{ role: 'user', content: 'hi' }],
    };
    const p2 = await client.responses.create(resp as never);
    const f2 = forkRequest({ format: 'openai-responses', body: resp, reply: p2.output }, 'Summarize.', {
      requireParity: true,
    });
    const forked = await client.responses.create(f2.body as never);
    expectParity(r.sent[2] as string, r.sent[3] as string, 'input');
    expect(forked.usage?.input_tokens_details.cached_tokens).toBeGreaterThan(0);
  });
});

describe('verifyForkParity', () => {
  const body = agentConversation({ turns: 2 }) as Json;
  it('finds a fork that sends a wider tools[] and refuses to build it with requireParity', () => {
    const fork = forkRequest({ format: 'anthropic-messages', body }, 'Review.');
    const wider = {
      ...fork.body,
      tools: [
        ...(body.tools as Json[]),
        { name: 'extra', description: 'x', input_schema: { type: 'object' } },
      ],
    };
    const parity = verifyForkParity({ format: 'anthropic-messages', body }, { body: wider, headers: {} });
    expect(parity.ok).toBe(false);
    expect(parity.fields).toEqual(['tools']);
    expect(parity.divergence?.level).toBe('tools');
    expect(verifyForkParity({ format: 'anthropic-messages', body }, fork).ok).toBe(true);
    expect(() =>
      forkRequest({ format: 'anthropic-messages', body, headers: { 'anthropic-beta': 'a' } }, 'x', {
        requireParity: true,
      }),
    ).not.toThrow();
    if (parity.ok) throw new Error('unreachable');
    const bad = new ForkParityError(parity);
    expect(bad.code).toBe('CW_FORK_PARITY');
    expect(bad.message).toContain('tools differs from the parent');
    // The parity result always comes with the fork, and the format is decided when not given.
    expect(fork.parity.ok).toBe(true);
    expect(fork.format).toBe('anthropic-messages');
    expect(forkRequest({ body }, 'Review.').format).toBe('anthropic-messages');
    expect(forkRequest({ route: '/v1/messages', body: JSON.stringify(body) }, 'x').format).toBe(
      'anthropic-messages',
    );
  });

  it('takes the parent as the bytes it sent, and checks parity on the bytes the fork will send', () => {
    const sent = Buffer.from(JSON.stringify(body, null, 2)); // pretty-printed: other bytes, same prefix
    const fork = forkRequest({ body: sent }, 'Review.');
    expect(fork.parity).toMatchObject({ ok: true, divergence: null, fields: [] });
    expect(fork.bytes.equals(Buffer.from(JSON.stringify(fork.body)))).toBe(true);
    // A fork whose bytes drop a tool is caught on the bytes, whatever object it came from.
    const narrower = Buffer.from(JSON.stringify({ ...fork.body, tools: (body.tools as Json[]).slice(1) }));
    const parity = verifyForkParity({ body: sent }, { body: narrower, headers: {} });
    expect(parity.ok).toBe(false);
    if (!parity.ok)
      expect(parity.reason).toMatch(
        /tools differs from the parent's; the prefix diverges at block 0 \(tools\)/,
      );
  });

  it('keeps the parent readable under automatic caching when the fork part is longer than the lookback', () => {
    const auto = {
      ...(agentConversation({ turns: 2, cacheLast: false }) as Json),
      cache_control: { type: 'ephemeral' },
    };
    const reply = Array.from({ length: 25 }, (_, i) => ({ type: 'text', text: `part ${i}` }));
    const fork = forkRequest({ format: 'anthropic-messages', body: auto, reply }, 'Review.');
    const messages = (fork.body as Json).messages as Array<{ content: Json[] }>;
    const parentLast = messages[messages.length - 3]?.content;
    expect(parentLast?.[parentLast.length - 1]?.cache_control).toEqual({ type: 'ephemeral' });
    expect(verifyForkParity({ format: 'anthropic-messages', body: auto }, fork).ok).toBe(true);
  });
});

describe('BackgroundForks', () => {
  const task = <T>(parent: string, run: (signal: AbortSignal) => Promise<T>, isCurrent = () => true) => ({
    parent,
    run,
    isCurrent,
    apply: () => {},
  });

  it('allows one pending fork per parent, and no fork from a fork', async () => {
    const forks = new BackgroundForks();
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let inner: unknown;
    const done = forks.start(
      task('p', async () => {
        try {
          forks.start(task('q', async () => 1));
        } catch (err) {
          inner = err;
        }
        await gate;
        return 'ok';
      }),
    );
    expect(() => forks.start(task('p', async () => 2))).toThrow(/already has 1 pending/);
    release();
    expect(await done).toEqual({ ok: true, status: 'applied', value: 'ok' });
    expect(inner).toBeInstanceOf(ForkRefusedError);
    expect((inner as Error).message).toMatch(/a fork cannot start a fork/);
  });

  it('discards a stale result, stops after N failures, and cancels with a bounded wait', async () => {
    const outcomes: string[] = [];
    const forks = new BackgroundForks({
      maxConsecutiveFailures: 2,
      cancelWaitMs: 50,
      onOutcome: (_p, o) => outcomes.push(o.status),
    });
    let applied = false;
    expect(
      await forks.start({
        parent: 'a',
        run: async () => 'x',
        isCurrent: () => false,
        apply: () => {
          applied = true;
        },
      }),
    ).toMatchObject({ ok: false, status: 'discarded', reason: expect.stringContaining('stale') });
    expect(applied).toBe(false);
    await forks.start(
      task('a', async () => {
        throw new Error('model said nothing');
      }),
    );
    await forks.start(
      task('a', async () => {
        throw new Error('again');
      }),
    );
    expect(forks.enabled).toBe(false);
    expect(() => forks.start(task('a', async () => 1))).toThrow(/stopped after 2 consecutive failures/);
    const other = new BackgroundForks({ cancelWaitMs: 50 });
    const slow = other.start(
      task(
        'b',
        (signal) =>
          new Promise((_r, reject) => signal.addEventListener('abort', () => reject(new Error('aborted')))),
      ),
    );
    const t0 = performance.now();
    await other.close();
    expect(performance.now() - t0).toBeLessThan(1000);
    expect(await slow).toMatchObject({ ok: false, status: 'cancelled' });
    expect(outcomes).toEqual(['discarded', 'failed', 'failed']);
  });

  it('validates replies: text, or one declared result read as data', () => {
    expect(validateReply({ content: [{ type: 'text', text: ' note ' }] })).toEqual({
      ok: true,
      kind: 'text',
      text: 'note',
    });
    expect(
      validateReply({ content: [{ type: 'tool_use', name: 'record', input: { a: 1 } }] }, 'record'),
    ).toEqual({ ok: true, kind: 'result', data: { a: 1 } });
    expect(
      validateReply({ content: [{ type: 'tool_use', name: 'Bash', input: { cmd: 'rm -rf /' } }] }, 'record'),
    ).toMatchObject({ ok: false, reason: expect.stringContaining('called Bash') });
    expect(validateReply({ content: [{ type: 'text', text: '  ' }] })).toEqual({
      ok: false,
      reason: 'the reply is empty',
    });
  });
});
