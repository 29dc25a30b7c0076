// Issue 14, "The simulator": hostile or malformed bodies get the provider's own 400 on every route, never a
// crash, a 500 in the other provider's shape, or a 200 the real API would not give.

import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { MAX_JSON_DEPTH } from '../../src/wire/json-scan.js';
import { startSim } from './helpers.js';

type Json = Record<string, unknown>;
const h = await startSim({ logger: {} });

const ROUTES = {
  messages: { path: '/v1/messages', provider: 'anthropic' },
  count_tokens: { path: '/v1/messages/count_tokens', provider: 'anthropic' },
  chat: { path: '/v1/chat/completions', provider: 'openai' },
  responses: { path: '/v1/responses', provider: 'openai' },
} as const;
type Route = keyof typeof ROUTES;

/** Raw bytes over real HTTP: the SDKs cannot even serialize some of these bodies. */
async function post(route: Route, body: string | Buffer): Promise<{ status: number; json: Json }> {
  const { path, provider } = ROUTES[route];
  const headers: Record<string, string> =
    provider === 'anthropic'
      ? { 'x-api-key': 'cacheward-test-key', 'anthropic-version': '2023-06-01' }
      : { authorization: 'Bearer sk-test-key' };
  const res = await fetch(`${h.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body,
  });
  return { status: res.status, json: (await res.json()) as Json };
}

/** The error is shaped as `provider` sends it: Anthropic `{type:"error",error:{type,message}}`, OpenAI `{error:{message,type,param,code}}`. */
function expectShape(route: Route, status: number, r: { status: number; json: Json }): string {
  expect(r.status).toBe(status);
  const err = r.json.error as Json;
  if (ROUTES[route].provider === 'anthropic') {
    expect(r.json.type).toBe('error');
    expect(Object.keys(err).sort()).toEqual(['message', 'type']);
  } else {
    expect(r.json.type).toBeUndefined();
    expect(Object.keys(err).sort()).toEqual(['code', 'message', 'param', 'type']);
  }
  if (status === 400) expect(err.type).toBe('invalid_request_error');
  return String(err.message);
}

const minimal: Record<Route, Json> = {
  messages: { model: 'claude-opus-5', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] },
  count_tokens: { model: 'claude-opus-5', messages: [{ role: 'user', content: 'hi' }] },
  chat: { model: 'gpt-5.4', messages: [{ role: 'user', content: 'hi' }] },
  responses: { model: 'gpt-5.4', input: 'hi' },
};

/** `minimal[route]` with `field` set to raw JSON text (which JSON.stringify could not produce). */
function withRaw(route: Route, field: string, raw: string): string {
  const s = JSON.stringify(minimal[route]);
  return `${s.slice(0, -1)},${JSON.stringify(field)}:${raw}}`;
}

describe('depth-limited parsing (issue 14: 100k-level nesting overflowed the stack, a 500 in the wrong shape)', () => {
  const deep = (n: number) => `${'['.repeat(n)}${']'.repeat(n)}`;

  it.each(Object.keys(ROUTES) as Route[])(
    'answers a 100,000-level parameter on %s with its own 400',
    async (route) => {
      for (const field of ['metadata', 'tool_choice', 'text', 'temperature']) {
        const r = await post(route, withRaw(route, field, deep(100_000)));
        expect(expectShape(route, 400, r)).toMatch(new RegExp(`deeper than ${MAX_JSON_DEPTH} levels`));
      }
    },
  );

  it('still accepts nesting at the documented limit', async () => {
    // A tool schema 100 levels deep is legal and parses.
    let schema: Json = { type: 'string' };
    for (let i = 0; i < 100; i++) schema = { type: 'object', properties: { a: schema } };
    const body = {
      ...minimal.messages,
      tools: [{ name: 'deep', description: 'd', input_schema: schema }],
    };
    const r = await post('messages', JSON.stringify(body));
    expect(r.status).toBe(200);
  });

  it.each(['messages', 'chat', 'responses'] as Route[])(
    'shapes an unexpected server error as %s does (a 500, never the other provider)',
    async (route) => {
      // A reply script whose getter throws stands in for any bug behind the route.
      const broken = await startSim({
        logger: {},
        script: {
          get conversations(): never {
            throw new Error('boom');
          },
        },
      });
      const res = await fetch(`${broken.url}${ROUTES[route].path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': 'k', authorization: 'Bearer k' },
        body: JSON.stringify(minimal[route]),
      });
      const json = (await res.json()) as Json;
      expect(expectShape(route, 500, { status: res.status, json })).toMatch(/error/i);
    },
  );
});

describe('the 200s that must be 400s (issue 14)', () => {
  const anthropic = h.anthropic();
  const openai = h.openai();

  async function anthropicError(body: Json): Promise<{ status: number; message: string }> {
    try {
      await anthropic.messages.create(body as never);
    } catch (err) {
      if (err instanceof Anthropic.APIError) {
        const e = (err.error as { error: { type: string; message: string } }).error;
        expect(e.type).toBe('invalid_request_error');
        return { status: err.status as number, message: e.message };
      }
      throw err;
    }
    throw new Error('expected a 400');
  }

  async function openaiError(
    call: () => Promise<unknown>,
  ): Promise<{ status: number; message: string; param: unknown }> {
    try {
      await call();
    } catch (err) {
      if (err instanceof OpenAI.APIError) {
        const e = err.error as { message: string; type: string; param: unknown };
        expect(e.type).toBe('invalid_request_error');
        return { status: err.status as number, message: e.message, param: e.param };
      }
      throw err;
    }
    throw new Error('expected a 400');
  }

  it('rejects a content block without `type`', async () => {
    const r = await anthropicError({
      ...minimal.messages,
      messages: [{ role: 'user', content: [{ text: 'hi' }] }],
    });
    expect(r).toEqual({ status: 400, message: 'messages.0.content.0.type: Field required' });
    const s = await anthropicError({ ...minimal.messages, system: [{ text: 'be brief' }] });
    expect(s.message).toBe('system.0.type: Field required');
    const c = await openaiError(() =>
      openai.chat.completions.create({
        model: 'gpt-5.4',
        messages: [{ role: 'user', content: [{ text: 'hi' }] }],
      } as never),
    );
    expect(c).toEqual({
      status: 400,
      message: "Missing required parameter: 'messages[0].content[0].type'.",
      param: 'messages[0].content[0].type',
    });
    const p = await openaiError(() =>
      openai.responses.create({
        model: 'gpt-5.4',
        input: [{ role: 'user', content: [{ text: 'hi' }] }],
      } as never),
    );
    expect(p.param).toBe('input[0].content[0].type');
  });

  it('rejects `stream: "yes"` on every route', async () => {
    const a = await anthropicError({ ...minimal.messages, stream: 'yes' });
    expect(a).toEqual({ status: 400, message: 'stream: Input should be a valid boolean' });
    for (const route of ['chat', 'responses'] as Route[]) {
      const r = await post(route, JSON.stringify({ ...minimal[route], stream: 'yes' }));
      expect(expectShape(route, 400, r)).toBe(
        "Invalid type for 'stream': expected a boolean, but got a string instead.",
      );
      expect((r.json.error as Json).param).toBe('stream');
    }
  });

  it('rejects `cache_control: "x"` on a block and at the top level', async () => {
    const block = await anthropicError({
      ...minimal.messages,
      messages: [{ role: 'user', content: [{ type: 'text', text: 'hi', cache_control: 'x' }] }],
    });
    expect(block).toEqual({
      status: 400,
      message: 'messages.0.content.0.cache_control: Input should be a valid dictionary',
    });
    const top = await anthropicError({ ...minimal.messages, cache_control: 'x' });
    expect(top.message).toBe('cache_control: Input should be a valid dictionary');
    const kind = await anthropicError({
      ...minimal.messages,
      system: [{ type: 'text', text: 'x', cache_control: { type: 'persistent' } }],
    });
    expect(kind.message).toBe("system.0.cache_control.type: Input should be 'ephemeral'");
  });

  it.each(Object.keys(ROUTES) as Route[])('rejects raw invalid UTF-8 on %s', async (route) => {
    const s = JSON.stringify(minimal[route]).replace('hi', 'h\u0001');
    const bytes = Buffer.from(s);
    bytes[bytes.indexOf(1)] = 0xff; // a byte that can never appear in UTF-8
    const r = await post(route, bytes);
    expect(expectShape(route, 400, r)).toMatch(/not valid UTF-8.*byte \d+/);
  });

  it('says what is wrong with `model: 123` (a type error, not a missing field)', async () => {
    const a = await anthropicError({ ...minimal.messages, model: 123 });
    expect(a.message).toBe('model: Input should be a valid string');
    const m = await anthropicError({ max_tokens: 16, messages: minimal.messages.messages });
    expect(m.message).toBe('model: Field required');
    for (const route of ['chat', 'responses'] as Route[]) {
      const r = await post(route, JSON.stringify({ ...minimal[route], model: 123 }));
      expect(expectShape(route, 400, r)).toBe(
        "Invalid type for 'model': expected a string, but got an integer instead.",
      );
    }
  });
});
