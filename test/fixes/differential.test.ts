// What the provider accepts directly, it accepts through any fix: a corpus of valid requests (and bodies
// fast-check makes) is sent to one real simulator directly and through a real proxy for every combination
// of the built-in fixes; the status must be the same, and no fix may need the refusal fallback to get there.

import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readCaptures } from '../../src/capture/capture-reader.js';
import { VirtualClock } from '../../src/core/clock.js';
import { TOOL_CHANGES_BETA } from '../../src/fixes/anthropic-messages.js';
import { FIX_ORDER } from '../../src/fixes/registry.js';
import { createProxy } from '../../src/proxy/create-proxy.js';
import { createSimulator } from '../../src/sim/simulator.js';
import { STYLES, TRICKY, writeJson } from '../fixtures/raw-json.js';

type Json = Record<string, unknown>;
const KEY = 'sk-differential';

/** One request: where, its body (as a value, written in `style`), and its headers. */
interface Req {
  route: string;
  body: Json;
  headers?: Record<string, string>;
  style?: keyof typeof STYLES;
}
/** A conversation: its requests in order, each continuing the one before. */
interface Conv {
  name: string;
  requests: Req[];
}

/** Models with mid-conversation system messages and tool changes, and without (anthropic-models.ts). */
const SUPPORTS = ['claude-opus-5', 'claude-opus-4-8'];
const LACKS = ['claude-sonnet-5', 'claude-opus-4-5'];
const MODELS = [...SUPPORTS, ...LACKS];
/** The corpus runs on one of each; the generated bodies on all of them. */
const CORPUS_MODELS = [SUPPORTS[0], LACKS[0]] as string[];

const tool = (name: string, extra: Json = {}): Json => ({
  name,
  description: `${name}: does one thing well`,
  input_schema: { type: 'object', properties: { q: { type: 'string' } }, required: ['q'] },
  ...extra,
});
const user = (content: unknown): Json => ({ role: 'user', content });
const assistant = (content: unknown): Json => ({ role: 'assistant', content });
const text = (t: string, extra: Json = {}): Json => ({ type: 'text', text: t, ...extra });
const CC = { type: 'ephemeral' };
const REMINDER = text('<system-reminder>\nToday is 2026-12-01.\n</system-reminder>');
const billing = (n: number) =>
  text(`x-anthropic-billing-header: cc_version=2.1.195.a1b; cc_entrypoint=sdk-cli; cch=${n}0000;`);

/** A conversation over Anthropic Messages: `turns` grows the history; `at` adds per-turn fields. */
function anthropic(
  name: string,
  model: string,
  turns: Array<{ messages: Json[]; extra?: Json }>,
  options: { route?: string; headers?: Record<string, string>; style?: Req['style'] } = {},
): Conv {
  return {
    name: `${name} on ${model}`,
    requests: turns.map((t) => ({
      route: options.route ?? '/v1/messages',
      ...(options.headers ? { headers: options.headers } : {}),
      ...(options.style ? { style: options.style } : {}),
      body: {
        model,
        ...(options.route?.endsWith('count_tokens') ? {} : { max_tokens: 256 }),
        ...t.extra,
        messages: t.messages,
      },
    })),
  };
}

/** Turns of one history: each later turn is the one before plus an assistant reply and a user message. */
function grow(first: Json[], replies: Array<[unknown, unknown]>): Json[][] {
  const out = [first];
  for (const [a, u] of replies) out.push([...(out[out.length - 1] as Json[]), assistant(a), user(u)]);
  return out;
}

const toolUse = (id: string, name: string, input: unknown = { q: 'x' }): Json => ({
  type: 'tool_use',
  id,
  name,
  input,
});
const toolResult = (id: string): Json => ({ type: 'tool_result', tool_use_id: id, content: 'done' });

/** The hand-written corpus: each shape the issue names, on models with and without tool changes. */
function corpus(): Conv[] {
  const out: Conv[] = [];
  for (const model of CORPUS_MODELS) {
    const simple = grow([user(`plain chat on ${model}`)], [['Hello.', 'And then?']]);
    out.push(
      anthropic(
        'no tools',
        model,
        simple.map((m) => ({ messages: m })),
      ),
    );
    out.push(
      anthropic(
        'empty tools',
        model,
        simple.map((m) => ({ messages: m, extra: { tools: [] } })),
      ),
    );
    out.push(
      anthropic(
        'string system, no tools',
        model,
        grow([user(`system string on ${model}`)], [['Hi.', 'More.']]).map((m) => ({
          messages: m,
          extra: { system: 'Be brief.' },
        })),
      ),
    );
    out.push(
      anthropic('a large tool-less request', model, [
        { messages: [user(`large ${model} ${'lorem ipsum dolor sit amet '.repeat(6_000)}`)] },
      ]),
    );
    const changing = grow(
      [user([text(`tools change on ${model}`, { cache_control: CC })])],
      [
        ['Done one.', 'next'],
        ['Done two.', 'next again'],
      ],
    );
    out.push(
      anthropic('tools added then removed, markers on system and the last tool', model, [
        {
          messages: changing[0] as Json[],
          extra: {
            system: [text('You are careful.', { cache_control: CC })],
            tools: [tool('Alpha'), tool('Bravo', { cache_control: CC })],
          },
        },
        {
          messages: changing[1] as Json[],
          extra: {
            system: [text('You are careful.', { cache_control: CC })],
            tools: [tool('Alpha'), tool('Bravo'), tool('Charlie', { cache_control: CC })],
          },
        },
        {
          messages: changing[2] as Json[],
          extra: {
            system: [text('You are careful.', { cache_control: CC })],
            tools: [tool('Charlie'), tool('Alpha', { cache_control: { type: 'ephemeral', ttl: '1h' } })],
          },
        },
      ]),
    );
    const server = grow([user(`server tools on ${model}`)], [['Searched.', 'again']]);
    out.push(
      anthropic('server tools', model, [
        {
          messages: server[0] as Json[],
          extra: { tools: [{ type: 'web_search_20250305', name: 'web_search', max_uses: 2 }, tool('Alpha')] },
        },
        {
          messages: server[1] as Json[],
          extra: {
            tools: [
              { type: 'web_search_20250305', name: 'web_search', max_uses: 2 },
              tool('Alpha'),
              tool('Zulu'),
            ],
          },
        },
      ]),
    );
    const search = grow([user(`tool search on ${model}`)], [['Found.', 'use it']]);
    out.push(
      anthropic('tool search with deferred tools', model, [
        {
          messages: search[0] as Json[],
          extra: {
            tools: [
              { type: 'tool_search_tool_regex_20251119', name: 'tool_search_tool_regex' },
              tool('Alpha'),
              tool('Deferred', { defer_loading: true }),
            ],
          },
        },
        {
          messages: search[1] as Json[],
          extra: {
            tools: [
              { type: 'tool_search_tool_regex_20251119', name: 'tool_search_tool_regex' },
              tool('Alpha'),
              tool('Deferred', { defer_loading: true }),
              tool('Later', { defer_loading: true }),
            ],
          },
        },
      ]),
    );
    for (const choice of [
      { type: 'any' },
      { type: 'tool', name: 'Alpha' },
      { type: 'none' },
      { type: 'auto' },
    ]) {
      const msgs = grow([user(`tool_choice ${choice.type} on ${model}`)], [['Ok.', 'again']]);
      out.push(
        anthropic(
          `tool_choice ${choice.type}`,
          model,
          msgs.map((m, k) => ({
            messages: m,
            extra: { tool_choice: choice, tools: k ? [tool('Alpha'), tool('Bravo')] : [tool('Alpha')] },
          })),
        ),
      );
    }
    const loop = [
      user(`thinking on ${model}`),
      assistant([
        { type: 'thinking', thinking: 'Let me look.', signature: 'c2ln' },
        toolUse('toolu_1', 'Alpha', TRICKY),
      ]),
      user([toolResult('toolu_1')]),
    ];
    out.push(
      anthropic(
        'thinking and a tool loop (a tool_use input a re-serialization would change)',
        model,
        [
          {
            messages: loop.slice(0, 1),
            extra: {
              thinking: { type: 'enabled', budget_tokens: 1024 },
              max_tokens: 4096,
              tools: [tool('Alpha')],
            },
          },
          {
            messages: loop,
            extra: {
              thinking: { type: 'enabled', budget_tokens: 1024 },
              max_tokens: 4096,
              tools: [tool('Alpha')],
            },
          },
        ],
        { style: 'pretty' },
      ),
    );
    out.push(
      anthropic('a max_tokens: 0 pre-warm', model, [
        {
          messages: [user(`pre-warm on ${model}`)],
          extra: {
            max_tokens: 0,
            system: [text('You are careful.', { cache_control: CC })],
            tools: [tool('Alpha', { cache_control: CC })],
          },
        },
      ]),
    );
    out.push(
      anthropic(
        'streaming',
        model,
        grow([user(`streaming on ${model}`)], [['Streamed.', 'more']]).map((m, k) => ({
          messages: m,
          extra: { stream: true, tools: k ? [tool('Alpha'), tool('Bravo')] : [tool('Alpha')] },
        })),
      ),
    );
    for (const tools of [[], [tool('Alpha')]])
      out.push(
        anthropic(
          `count_tokens with ${tools.length} tools`,
          model,
          [{ messages: [user(`count on ${model} ${tools.length}`)], extra: { tools, system: 'Be brief.' } }],
          { route: '/v1/messages/count_tokens' },
        ),
      );
    out.push(
      anthropic(
        'Claude Code 2.1.195 shape: billing line, reminder moved into its own message, python spacing',
        model,
        [
          {
            messages: [user([text(`claude code on ${model}`), REMINDER])],
            extra: {
              system: [billing(1), text('You are Claude Code.', { cache_control: CC })],
              tools: [tool('Bash'), tool('Read')],
            },
          },
          {
            messages: [
              user([text(`claude code on ${model}`)]),
              user([REMINDER]),
              assistant('Reading.'),
              user([text('go on', { cache_control: CC })]),
            ],
            extra: {
              system: [billing(2), text('You are Claude Code.', { cache_control: CC })],
              tools: [tool('Bash'), tool('Read'), tool('mcp__db__query')],
            },
          },
        ],
        {
          style: 'python',
          headers: { 'anthropic-beta': 'claude-code-20250219,interleaved-thinking-2025-05-14' },
        },
      ),
    );
  }
  for (const model of SUPPORTS) {
    const sys = [
      user(`mid-conversation system on ${model}`),
      { role: 'system', content: [text('Auto mode is on.')] },
      assistant('Noted.'),
      user('go on'),
    ];
    out.push(
      anthropic('mid-conversation system messages', model, [
        { messages: sys.slice(0, 2), extra: { tools: [tool('Alpha')] } },
        { messages: sys, extra: { tools: [tool('Alpha'), tool('Bravo')] } },
      ]),
    );
    // The newest Claude Code: its own deferred placeholder and the beta; a loaded tool joins deferred.
    const placeholder = tool('DeferredToolPlaceholder', { defer_loading: true });
    const cc = [
      user(`newest claude code on ${model}`),
      { role: 'system', content: 'The following deferred tools are now available via ToolSearch: WebFetch' },
      assistant([toolUse('toolu_9', 'ToolSearch', { query: 'select:WebFetch' })]),
      user([
        {
          type: 'tool_result',
          tool_use_id: 'toolu_9',
          content: [{ type: 'tool_reference', tool_name: 'WebFetch' }],
        },
      ]),
    ];
    out.push(
      anthropic(
        'the newest Claude Code: its own deferred tools and the beta',
        model,
        [
          { messages: cc.slice(0, 2), extra: { tools: [tool('Bash'), tool('ToolSearch'), placeholder] } },
          {
            messages: cc,
            extra: {
              tools: [
                tool('Bash'),
                tool('ToolSearch'),
                placeholder,
                tool('WebFetch', { defer_loading: true }),
              ],
            },
          },
        ],
        {
          headers: {
            'anthropic-beta': `claude-code-20250219,${TOOL_CHANGES_BETA},advanced-tool-use-2025-11-20`,
          },
        },
      ),
    );
  }
  const fn = (name: string) => ({
    type: 'function',
    function: { name, description: `${name} tool`, parameters: { type: 'object', properties: {} } },
  });
  const chat = [
    { role: 'system', content: 'Be brief.' },
    user('chat with tools'),
    {
      role: 'assistant',
      content: null,
      tool_calls: [
        {
          id: 'call_1',
          type: 'function',
          function: { name: 'alpha', arguments: '{"n":12345678901234567890}' },
        },
      ],
    },
    { role: 'tool', tool_call_id: 'call_1', content: 'done' },
  ];
  for (const stream of [false, true])
    out.push({
      name: `openai chat, shuffled tools${stream ? ', streamed' : ''}`,
      requests: [
        {
          route: '/v1/chat/completions',
          body: { model: 'gpt-5.5', messages: chat.slice(0, 2), tools: [fn('bravo'), fn('alpha')], stream },
        },
        {
          route: '/v1/chat/completions',
          style: 'pretty',
          body: {
            model: 'gpt-5.5',
            messages: chat,
            tools: [fn('charlie'), fn('alpha'), fn('bravo')],
            tool_choice: 'auto',
            stream,
          },
        },
      ],
    });
  const rfn = (name: string) => ({
    type: 'function',
    name,
    description: `${name} tool`,
    parameters: { type: 'object', properties: {} },
  });
  out.push({
    name: 'openai responses, shuffled tools',
    requests: [
      {
        route: '/v1/responses',
        body: {
          model: 'gpt-5.5',
          instructions: 'Be brief.',
          input: 'responses with tools',
          tools: [rfn('bravo'), rfn('alpha')],
        },
      },
      {
        route: '/v1/responses',
        style: 'tabs',
        body: {
          model: 'gpt-5.5',
          instructions: 'Be brief.',
          input: [
            user('responses with tools'),
            { type: 'function_call', call_id: 'c1', name: 'alpha', arguments: '{"price":1.10}' },
            { type: 'function_call_output', call_id: 'c1', output: 'done' },
          ],
          tools: [rfn('bravo'), rfn('alpha'), rfn('charlie')],
        },
      },
    ],
  });
  return out;
}

/**
 * Valid Anthropic conversations fast-check makes: tools (some marked, some deferred), a system, alternating
 * turns with tool loops, tool_choice, thinking, streaming or a pre-warm, any model, any spacing; a second
 * request with the tools changed.
 */
const generated: fc.Arbitrary<Conv> = fc
  .record({
    model: fc.constantFrom(...MODELS),
    names: fc.uniqueArray(fc.constantFrom('Alpha', 'Bravo', 'Charlie', 'Delta', 'Echo'), {
      minLength: 0,
      maxLength: 4,
    }),
    markLast: fc.boolean(),
    deferSome: fc.boolean(),
    system: fc.constantFrom('none', 'string', 'blocks', 'marked'),
    turns: fc.integer({ min: 0, max: 3 }),
    loop: fc.boolean(),
    choice: fc.constantFrom('none', 'auto', 'any', 'tool', 'off'),
    mode: fc.constantFrom('plain', 'stream', 'prewarm', 'thinking'),
    autoCache: fc.boolean(),
    change: fc.constantFrom('same', 'add', 'remove', 'reorder'),
    style: fc.constantFrom('compact', 'pretty', 'python', 'tabs'),
    words: fc.string({ minLength: 1, maxLength: 30 }),
  })
  .map((g): Conv => {
    const tools = (names: string[]) =>
      names.map((n, i) =>
        tool(n, {
          ...(g.markLast && i === names.length - 1 ? { cache_control: CC } : {}),
          // Deferred: every tool after the first (at least one stays loaded, as the API requires).
          ...(g.deferSome && i > 0 && !(g.markLast && i === names.length - 1) ? { defer_loading: true } : {}),
        }),
      );
    const first = g.names;
    const second =
      g.change === 'add'
        ? [...first, 'Foxtrot']
        : g.change === 'remove'
          ? first.slice(0, -1)
          : g.change === 'reorder'
            ? [...first].reverse()
            : first;
    const history: Json[] = [user([text(`generated: ${g.words}`)])];
    for (let t = 0; t < g.turns; t++) {
      const name = first[0];
      if (g.loop && name) {
        history.push(assistant([text('Using a tool.'), toolUse(`toolu_${t}`, name, TRICKY)]));
        history.push(user([toolResult(`toolu_${t}`)]));
      } else {
        history.push(assistant(`Reply ${t}.`));
        history.push(user(`Turn ${t}.`));
      }
    }
    const next = [...history, assistant('One more reply.'), user('And the next.')];
    const extra = (names: string[]): Json => {
      const out: Json = {};
      if (names.length) out.tools = tools(names);
      if (g.system === 'string') out.system = 'You are careful.';
      if (g.system === 'blocks') out.system = [text('You are careful.')];
      if (g.system === 'marked') out.system = [text('You are careful.', { cache_control: CC })];
      const prewarm = g.mode === 'prewarm';
      if (names.length && g.choice !== 'off' && !(prewarm && (g.choice === 'any' || g.choice === 'tool')))
        out.tool_choice = g.choice === 'tool' ? { type: 'tool', name: names[0] } : { type: g.choice };
      if (g.mode === 'stream') out.stream = true;
      if (prewarm) out.max_tokens = 0;
      if (g.mode === 'thinking') {
        out.thinking = { type: 'enabled', budget_tokens: 1024 };
        out.max_tokens = 4096;
        // Extended thinking allows tool_choice auto or none only.
        if (out.tool_choice && !['auto', 'none'].includes((out.tool_choice as Json).type as string))
          delete out.tool_choice;
      }
      if (g.autoCache) out.cache_control = CC;
      return out;
    };
    return {
      name: `generated ${JSON.stringify(g)}`,
      requests: [
        {
          route: '/v1/messages',
          style: g.style,
          body: { model: g.model, max_tokens: 256, ...extra(first), messages: history },
        },
        {
          route: '/v1/messages',
          style: g.style,
          body: { model: g.model, max_tokens: 256, ...extra(second), messages: next },
        },
      ],
    };
  });

/** Every non-empty combination of the built-in fixes. */
const SETS = Array.from({ length: 2 ** FIX_ORDER.length - 1 }, (_, k) =>
  FIX_ORDER.filter((_, i) => (k + 1) & (1 << i)),
);

const clock = new VirtualClock();
const sim = createSimulator({ clock });
let simUrl: string;
beforeAll(async () => {
  simUrl = await sim.listen();
});
afterAll(() => sim.close());

/** Sends one request and reads its answer whole; the status. */
async function send(base: string, req: Req, nonce: string): Promise<{ status: number; text: string }> {
  const body = nonce ? withNonce(req.body, nonce) : req.body;
  const res = await fetch(`${base}${req.route}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'x-api-key': KEY,
      authorization: `Bearer ${KEY}`,
      ...req.headers,
    },
    body: writeJson(body, STYLES[req.style ?? 'compact'] as (typeof STYLES)['compact']),
  });
  return { status: res.status, text: await res.text() };
}

/** The body with a nonce in its first user message (a conversation of its own in a proxy that saw it before). */
function withNonce(body: Json, nonce: string): Json {
  const key = Array.isArray(body.messages) ? 'messages' : 'input';
  const list = body[key];
  if (!Array.isArray(list)) return { ...body, input: `${String(list)} ${nonce}` };
  const at = list.findIndex((m) => (m as Json).role === 'user');
  const m = list[at] as Json;
  // In the text of its first block (a block of its own would change the history's units).
  const blocks = m.content as Json[];
  const content =
    typeof m.content === 'string'
      ? `${m.content} ${nonce}`
      : blocks.map((b, k) => (k === 0 ? { ...b, text: `${String(b.text)} ${nonce}` } : b));
  return { ...body, [key]: list.map((x, i) => (i === at ? { ...m, content } : x)) };
}

/** Direct statuses, by request (the simulator's validation depends on the request alone). */
const direct = new Map<string, number>();
async function directStatus(req: Req): Promise<number> {
  const key = JSON.stringify(req);
  let status = direct.get(key);
  if (status === undefined) {
    const r = await send(simUrl, req, '');
    // The corpus is valid: the provider accepts every request as sent.
    expect(r.status, `${req.route} ${r.text}`).toBe(200);
    status = r.status;
    direct.set(key, status);
  }
  return status;
}

let runs = 0;
/**
 * A conversation through the proxy: each status as the direct one, and none reached only by the refusal
 * fallback (a fix the provider refused is counted on the health endpoint, and would hide here).
 */
async function throughProxy(
  proxy: { url: string; health(): { fixRefusals?: Record<string, number> } },
  conv: Conv,
  set: string[],
): Promise<void> {
  const nonce = `n${++runs}`;
  const refusals = () => Object.values(proxy.health().fixRefusals ?? {}).reduce((a, b) => a + b, 0);
  for (const [k, req] of conv.requests.entries()) {
    clock.advance(1_000);
    const want = await directStatus(req);
    const before = refusals();
    const got = await send(proxy.url, req, nonce);
    const what = `--fix ${set.join(',')}: ${conv.name}, request ${k + 1}`;
    expect(got.status, `${what}: ${got.text.slice(0, 300)}`).toBe(want);
    expect(refusals() - before, `${what}: the provider refused the fixed request`).toBe(0);
  }
}

describe('through every combination of fixes, the provider answers as it answers the client directly', () => {
  const convs = corpus();
  it.each(SETS.map((s) => [s.join(','), s] as const))('--fix %s', async (_name, set) => {
    const warnings: string[] = [];
    const dir = mkdtempSync(join(tmpdir(), 'cacheward-differential-'));
    const proxy = createProxy({
      upstream: simUrl,
      dir,
      clock,
      capture: 'hashes',
      fixes: set,
      logger: { warn: (l) => warnings.push(l) },
    });
    await proxy.listen();
    try {
      for (const conv of convs) await throughProxy(proxy, conv, set);
      await fc.assert(
        fc.asyncProperty(generated, (conv) => throughProxy(proxy, conv, set)),
        { seed: 27, numRuns: 16 },
      );
      // No fix failed open on the way (a throwing fix would also hide behind equal statuses).
      expect(warnings.filter((w) => /refused|failed/.test(w))).toEqual([]);
      // Not vacuous: every fix of the set changed requests of the corpus.
      await proxy.flush();
      const changed = new Map<string, number>();
      for await (const { record } of readCaptures([dir]))
        for (const f of record.fixes) if (f.changed) changed.set(f.fix, (changed.get(f.fix) ?? 0) + 1);
      for (const fix of set) expect(changed.get(fix) ?? 0, `${fix} changed no request`).toBeGreaterThan(0);
    } finally {
      await proxy.close();
    }
  });
});
