// tools-freeze on the requests it must leave alone (no tools, a client that defers its own tools under the
// beta) and the ones it changes: each forwarded request is one the simulator's rules accept.

import { describe, expect, it } from 'vitest';
import { checkAnthropicRequest } from '../../src/cache/anthropic-rules.js';
import { TOOL_CHANGES_BETA } from '../../src/fixes/anthropic-messages.js';
import { applyPatches } from '../../src/fixes/byte-patch.js';
import { type FreezeState, PLACEHOLDER_TOOL, toolsFreeze } from '../../src/fixes/tools-freeze.js';
import { parsePrefix } from '../../src/prefix/build-prefix.js';

type Json = Record<string, unknown>;
const ctx = {
  provider: 'anthropic' as const,
  route: '/v1/messages',
  now: 0,
  conversation: 'c',
  relation: 'new' as const,
};
const tool = (name: string, extra: Json = {}): Json => ({
  name,
  description: `${name} tool`,
  input_schema: { type: 'object', properties: {} },
  ...extra,
});
const base = (extra: Json): Json => ({
  model: 'claude-opus-5',
  max_tokens: 16,
  messages: [{ role: 'user', content: 'hi' }],
  ...extra,
});

/** The fix on one body: what it forwards (bytes and beta), its state and notes, and the rules' verdict. */
function apply(body: Json, state: FreezeState = toolsFreeze.initialState(), beta?: string) {
  const text = JSON.stringify(body);
  const headers: Record<string, string> = beta ? { 'anthropic-beta': beta } : {};
  const prefix = parsePrefix(text, { format: 'anthropic-messages', headers });
  const out = toolsFreeze.apply({ body: Buffer.from(text), prefix, headers }, state, ctx);
  const forwarded = out.patches ? applyPatches(Buffer.from(text), out.patches).toString() : text;
  const fbeta = out.headers?.['anthropic-beta'] ?? beta;
  const fprefix = parsePrefix(forwarded, {
    format: 'anthropic-messages',
    headers: fbeta ? { 'anthropic-beta': fbeta } : {},
  });
  return {
    ...out,
    forwarded,
    violation: checkAnthropicRequest(JSON.parse(forwarded) as Json, fprefix),
  };
}

describe('tools-freeze leaves alone', () => {
  it.each([
    ['no tools', base({})],
    ['an empty tools[]', base({ tools: [] })],
    ['a string system and no tools', base({ system: 'Be brief.' })],
  ])('%s: forwarded as sent, nothing frozen', (_name, body) => {
    const out = apply(body);
    expect(out.patches).toBeUndefined();
    expect(out.headers).toBeUndefined();
    expect(out.state.frozen).toBeNull();
    expect(out.violation).toBeUndefined();
  });

  it('a client that defers its own tools under the beta (the newest Claude Code): no second placeholder', () => {
    const body = base({
      tools: [tool('Read'), tool('DeferredToolPlaceholder', { defer_loading: true })],
    });
    const out = apply(body, undefined, `claude-code-20250219,${TOOL_CHANGES_BETA}`);
    expect(out.patches).toBeUndefined();
    expect(out.notes.join(' ')).toContain('declares its own deferred tools');
    expect(out.forwarded).not.toContain(PLACEHOLDER_TOOL.name as string);
  });
});

describe('tools-freeze changes, and what it forwards is accepted', () => {
  it('freezes tools with deferred ones when the client has no beta (tool search), beta added', () => {
    const out = apply(base({ tools: [tool('search'), tool('Later', { defer_loading: true })] }));
    expect(out.forwarded).toContain(PLACEHOLDER_TOOL.name as string);
    expect(out.headers?.['anthropic-beta']).toBe(TOOL_CHANGES_BETA);
    expect(out.violation).toBeUndefined();
  });

  it('defers an added tool that carries cache_control without its marker (a deferred tool may not carry one)', () => {
    const first = apply(base({ tools: [tool('Read')] }));
    const body = base({
      tools: [tool('Read'), tool('Added', { cache_control: { type: 'ephemeral' } })],
      messages: [
        { role: 'user', content: 'hi' },
        { role: 'assistant', content: 'ok' },
        { role: 'user', content: 'more' },
      ],
    });
    const out = apply(body, first.state);
    const tools = (JSON.parse(out.forwarded) as { tools: Json[] }).tools;
    expect(tools.map((t) => t.name)).toEqual(['Read', PLACEHOLDER_TOOL.name, 'Added']);
    expect(tools[2]).toEqual({ ...tool('Added'), defer_loading: true });
    // The client's own bytes of the tool, the marker's place taken by the flag.
    expect(out.forwarded).toContain(
      '"name":"Added","description":"Added tool","input_schema":{"type":"object","properties":{}},"defer_loading":true}',
    );
    expect(out.violation).toBeUndefined();
  });

  it('reads a state an earlier version wrote (parsed tools): the same frozen bytes go out', () => {
    const tools = [tool('Read'), tool('Write')];
    const old = {
      frozen: tools,
      added: [tool('Later')],
      removed: [],
      announcements: [],
      warned: [],
    } as unknown as FreezeState;
    const out = apply(base({ tools: [tool('Write'), tool('Read'), tool('Later')] }), old);
    // What the earlier version forwarded: JSON.stringify of its parsed tools, the placeholder, the addition.
    expect(out.forwarded).toContain(
      JSON.stringify([...tools, PLACEHOLDER_TOOL, { ...tool('Later'), defer_loading: true }]),
    );
    expect(out.violation).toBeUndefined();
  });

  it('re-freezes rather than place an announcement where a system message is refused (the history was reshaped)', () => {
    const turns = (n: number): Json[] =>
      Array.from({ length: n }, (_, i) => [
        { role: 'user', content: `turn ${i}` },
        { role: 'assistant', content: `answer ${i}` },
      ]).flat();
    const first = apply(
      base({ tools: [tool('Read')], messages: [...turns(2), { role: 'user', content: 'go' }] }),
    );
    // A tool appears: announced before the request's end, after its last user turn (message 5).
    const grown = apply(
      base({
        tools: [tool('Read'), tool('Added')],
        messages: [...turns(2), { role: 'user', content: 'go' }],
      }),
      first.state,
    );
    expect(grown.violation).toBeUndefined();
    expect(grown.state.announcements.map((a) => a.at)).toEqual([5]);
    // The client's history comes back reshaped: message 4 is now an assistant turn, and message 5 follows it.
    const reshaped = [
      ...turns(2),
      { role: 'assistant', content: 'an extra answer' },
      { role: 'user', content: 'again' },
      { role: 'assistant', content: 'ok' },
      { role: 'user', content: 'on' },
    ];
    const out = apply(base({ tools: [tool('Read'), tool('Added')], messages: reshaped }), grown.state);
    expect(out.violation).toBeUndefined();
    expect(out.notes.join(' ')).toMatch(/no valid place/);
    expect(out.state.announcements).toEqual([]);
  });
});
