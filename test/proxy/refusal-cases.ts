// The conversations of the fix-refusal tests, shared by the proxy's and wrapFetch's: for every built-in fix, a
// conversation, the text only the fixed form of one of its requests carries, and which turn that is.

import { expect } from 'vitest';
import { type ReadRecord, readCaptures } from '../../src/capture/capture-reader.js';

export type Json = Record<string, unknown>;
export const MODEL = 'claude-opus-5';
export const KEY = 'sk-test-refusal';

const tool = (name: string): Json => ({
  name,
  description: `the ${name} tool`,
  input_schema: { type: 'object', properties: { q: { type: 'string' } } },
});
const SYSTEM = [{ type: 'text', text: 'You are a careful assistant.', cache_control: { type: 'ephemeral' } }];

/** One conversation: its turns, and the text only the fixed form of one of its requests carries. */
export interface Case {
  fix: string;
  marker: string;
  /** The client's turns; each later one continues the one before (the replies are added as they come). */
  turns: Array<(history: Json[]) => Json>;
  /** Which turn the fix changes (and the provider refuses). */
  refusedTurn: number;
  route?: string;
  status?: number;
}

export const user = (text: string): Json => ({ role: 'user', content: text });
export const anthropic = (messages: Json[], extra: Json = {}): Json => ({
  model: MODEL,
  max_tokens: 64,
  system: SYSTEM,
  tools: [tool('alpha'), tool('beta')],
  messages,
  ...extra,
});

export const CASES: Case[] = [
  {
    fix: 'tools-freeze',
    marker: 'cacheward_deferred_placeholder',
    turns: [(h) => anthropic([...h, user('first')]), (h) => anthropic([...h, user('second')])],
    refusedTurn: 0,
  },
  {
    fix: 'ttl',
    marker: '"ttl":"1h"',
    turns: [(h) => anthropic([...h, user('first')]), (h) => anthropic([...h, user('second')])],
    refusedTurn: 0,
  },
  {
    fix: 'tools-sort',
    marker: '"tools":[{"name":"alpha"',
    turns: [
      (h) => anthropic([...h, user('first')], { tools: [tool('beta'), tool('alpha')] }),
      (h) => anthropic([...h, user('second')], { tools: [tool('beta'), tool('alpha')] }),
    ],
    refusedTurn: 0,
  },
  {
    fix: 'strip-billing-header',
    marker: '"system":[{"type":"text","text":"You are',
    turns: [
      (h) =>
        anthropic([...h, user('first')], {
          system: [
            { type: 'text', text: 'x-anthropic-billing-header: cc_version=2.1.1.abc; cch=00001;' },
            ...SYSTEM,
          ],
        }),
      (h) =>
        anthropic([...h, user('second')], {
          system: [
            { type: 'text', text: 'x-anthropic-billing-header: cc_version=2.1.1.abc; cch=00002;' },
            ...SYSTEM,
          ],
        }),
    ],
    refusedTurn: 0,
  },
  {
    // The reminder sent in the first message, then moved into a message of its own: the fix merges it back.
    fix: 'pin-reminders',
    marker:
      '"text":"first"},{"type":"text","text":"<system-reminder>today</system-reminder>"}]},{"role":"assistant"',
    turns: [
      () =>
        anthropic([
          {
            role: 'user',
            content: [
              { type: 'text', text: 'first' },
              { type: 'text', text: '<system-reminder>today</system-reminder>' },
            ],
          },
        ]),
      (h) => anthropic([...split(h), user('second')]),
      (h) => anthropic([...h, user('third')]),
    ],
    refusedTurn: 1,
  },
  {
    fix: 'tools-sort',
    marker: '"tools":[{"type":"function","name":"alpha"',
    route: '/v1/responses',
    turns: [(h) => responses([...h, user('first')]), (h) => responses([...h, user('second')])],
    refusedTurn: 0,
  },
  {
    fix: 'tools-sort',
    marker: '"tools":[{"type":"function","function":{"name":"alpha"',
    route: '/v1/chat/completions',
    status: 422,
    turns: [(h) => chat([...h, user('first')]), (h) => chat([...h, user('second')])],
    refusedTurn: 0,
  },
];

/** The history with its first message's reminder moved into a user message of its own. */
function split(history: Json[]): Json[] {
  const [first, ...rest] = history as [{ content: Json[] }, ...Json[]];
  return [
    { role: 'user', content: [first.content[0]] },
    { role: 'user', content: [first.content[1]] },
    ...rest,
  ];
}

function chat(messages: Json[]): Json {
  const fn = (name: string) => ({
    type: 'function',
    function: { name, description: `the ${name} tool`, parameters: { type: 'object', properties: {} } },
  });
  return { model: 'gpt-5.5', messages, tools: [fn('beta'), fn('alpha')] };
}

function responses(input: Json[]): Json {
  const fn = (name: string) => ({
    type: 'function',
    name,
    description: `the ${name} tool`,
    parameters: { type: 'object', properties: {} },
  });
  return { model: 'gpt-5.5', input, tools: [fn('beta'), fn('alpha')] };
}

/** The assistant message a response holds, as the next request resends it. */
export function replyOf(route: string, json: Json): Json {
  if (route === '/v1/responses') {
    const text = (json.output as Array<{ content?: Array<{ text?: string }> }>)
      .flatMap((o) => o.content ?? [])
      .map((c) => c.text ?? '')
      .join('');
    return { role: 'assistant', content: text };
  }
  if (route === '/v1/chat/completions') {
    const m = (json.choices as Array<{ message: Json }>)[0]?.message as Json;
    return { role: 'assistant', content: m.content };
  }
  return { role: 'assistant', content: json.content };
}

export async function records(dir: string): Promise<ReadRecord[]> {
  const out: ReadRecord[] = [];
  for await (const r of readCaptures([dir])) out.push(r);
  return out.sort((a, b) => a.record.times.start - b.record.times.start);
}

/**
 * Plays a case's turns through `send` (the proxy's URL or a wrapped fetch), each continuing the one before,
 * with the simulator told to refuse the fixed form; every answer must be the 200 the client's own bytes get.
 * Returns the bytes the client sent, turn by turn.
 */
export async function playCase(
  c: Case,
  send: (route: string, init: RequestInit) => Promise<Response>,
  advance: () => void,
): Promise<Buffer[]> {
  const route = c.route ?? '/v1/messages';
  const sent: Buffer[] = [];
  let history: Json[] = [];
  for (const turn of c.turns) {
    advance();
    const body = turn(history);
    const bytes = Buffer.from(JSON.stringify(body));
    sent.push(bytes);
    const res = await send(route, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-api-key': KEY,
        authorization: `Bearer ${KEY}`,
        'x-sim-refuse-if': c.marker,
        ...(c.status ? { 'x-sim-refuse-status': String(c.status) } : {}),
      },
      body: bytes,
    });
    const json = (await res.json()) as Json;
    // Every request is answered as the provider answers the client's own bytes: never the refusal.
    expect(res.status, JSON.stringify(json)).toBe(200);
    history = [...((body.messages ?? body.input) as Json[]), replyOf(route, json)];
  }
  return sent;
}

/**
 * What the capture must say of a played case: the refused turn's note and the client's own bytes as what
 * went out; every later turn sent as the client made it, its note saying the fix is off.
 */
export function expectRefusalRecords(c: Case, recs: readonly ReadRecord[], sent: readonly Buffer[]): void {
  expect(recs).toHaveLength(c.turns.length);
  const refused = recs[c.refusedTurn] as ReadRecord;
  const note = refused.record.fixes.find((n) => n.fix === c.fix);
  expect(note?.refused?.status).toBe(c.status ?? 400);
  expect(note?.changed).toBe(false);
  expect(note?.notes.join(' ')).toContain('fix refused by the provider');
  expect(refused.body?.equals(sent[c.refusedTurn] as Buffer)).toBe(true);
  expect(refused.clientBody).toBeUndefined();
  for (let k = c.refusedTurn + 1; k < c.turns.length; k++) {
    const r = recs[k] as ReadRecord;
    expect(r.body?.equals(sent[k] as Buffer), `turn ${k}`).toBe(true);
    expect(r.record.fixes.find((n) => n.fix === c.fix)?.notes.join(' ')).toContain(
      'the provider refused it earlier',
    );
  }
}
