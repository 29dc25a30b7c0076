import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { createSimulator } from '../../src/sim/simulator.js';
import { EPHEMERAL, messagesBody, startSim } from './helpers.js';

type Json = Record<string, unknown>;
const h = await startSim();
const body = messagesBody(3, 100, { 2: EPHEMERAL });
const chatBody = {
  model: 'gpt-5.4',
  messages: [{ role: 'user', content: 'hello there, a longer reply please' }],
};
const fault = (f: string) => ({ headers: { 'x-sim-fault': f } });

async function anthropicError(promise: Promise<unknown>) {
  try {
    await promise;
  } catch (err) {
    return err;
  }
  throw new Error('expected an error');
}

describe('fault injection: error statuses', () => {
  it('answers 429 with retry-after, shaped for each provider', async () => {
    const a = (await anthropicError(
      h.anthropic().messages.create(body as never, fault('429')),
    )) as InstanceType<typeof Anthropic.APIError>;
    expect(a).toBeInstanceOf(Anthropic.RateLimitError);
    expect(a.headers?.get('retry-after')).toBe('1');
    expect((a.error as Json).type).toBe('error');
    expect(((a.error as Json).error as Json).type).toBe('rate_limit_error');
    const o = (await anthropicError(
      h.openai().chat.completions.create(chatBody as never, fault('429')),
    )) as InstanceType<typeof OpenAI.APIError>;
    expect(o).toBeInstanceOf(OpenAI.RateLimitError);
    expect(o.code).toBe('rate_limit_exceeded');
    expect(o.headers?.get('retry-after')).toBe('1');
  });

  it('answers overloaded as 529 (Anthropic) and 503 (OpenAI), and 500 as a server error', async () => {
    const a = (await anthropicError(
      h.anthropic().messages.create(body as never, fault('529')),
    )) as InstanceType<typeof Anthropic.APIError>;
    expect(a.status).toBe(529);
    expect(((a.error as Json).error as Json).type).toBe('overloaded_error');
    const o = (await anthropicError(
      h.openai().chat.completions.create(chatBody as never, fault('529')),
    )) as InstanceType<typeof OpenAI.APIError>;
    expect(o.status).toBe(503);
    const s = (await anthropicError(
      h.anthropic().messages.create(body as never, fault('500')),
    )) as InstanceType<typeof Anthropic.APIError>;
    expect(s).toBeInstanceOf(Anthropic.InternalServerError);
  });

  it('rejects an unknown fault name with a 400 that says which names exist', async () => {
    const e = (await anthropicError(
      h.anthropic().messages.create(body as never, fault('explode')),
    )) as InstanceType<typeof Anthropic.APIError>;
    expect(e.status).toBe(400);
    expect(((e.error as Json).error as Json).message).toMatch(/unknown fault "explode"/);
  });
});

describe('fault injection: streams', () => {
  it('sends an Anthropic error event mid-stream, which the SDK raises after the first events', async () => {
    const events: string[] = [];
    const stream = h.anthropic().messages.stream(body as never, fault('error-mid-stream'));
    stream.on('streamEvent', (e) => events.push(e.type));
    const err = (await anthropicError(stream.finalMessage())) as InstanceType<typeof Anthropic.APIError>;
    expect(err).toBeInstanceOf(Anthropic.APIError);
    expect(err.message).toMatch(/overloaded_error|Overloaded/);
    expect(events[0]).toBe('message_start');
  });

  it('sends an OpenAI error chunk mid-stream, which the SDK raises', async () => {
    const s = await h
      .openai()
      .chat.completions.create({ ...chatBody, stream: true } as never, fault('error-mid-stream'));
    const chunks: unknown[] = [];
    const err = await anthropicError(
      (async () => {
        for await (const c of s as unknown as AsyncIterable<unknown>) chunks.push(c);
      })(),
    );
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect(chunks.length).toBeGreaterThan(0);
  });

  it('sends a Responses error event mid-stream', async () => {
    const s = await h
      .openai()
      .responses.create(
        { model: 'gpt-5.6', input: 'hello', stream: true } as never,
        fault('error-mid-stream'),
      );
    const types: string[] = [];
    for await (const e of s as unknown as AsyncIterable<{ type: string }>) types.push(e.type);
    expect(types.at(-1)).toBe('error');
    expect(types).not.toContain('response.completed');
  });

  it('resets the connection mid-stream: the client sees a network error, not a clean end', async () => {
    const stream = h.anthropic().messages.stream(body as never, fault('reset-mid-stream'));
    const err = await anthropicError(stream.finalMessage());
    // The headers and first events arrived, then the connection dropped: the stream fails, never ends cleanly.
    expect(err).toBeInstanceOf(Anthropic.AnthropicError);
    expect(err).not.toBeInstanceOf(Anthropic.APIError);
    expect((err as Error).message).toMatch(/terminated|other side closed|reset/);
    const res = await fetch(`${h.url}/v1/messages`, {
      method: 'POST',
      headers: { 'x-api-key': 'k', 'content-type': 'application/json', 'x-sim-fault': 'reset-mid-stream' },
      body: JSON.stringify({ ...body, stream: true }),
    });
    expect(res.status).toBe(200);
    await expect(res.text()).rejects.toThrow();
  });

  it('stalls before the first byte long enough for a client timeout', async () => {
    const client = new Anthropic({ apiKey: 'k', baseURL: h.url, maxRetries: 0, timeout: 100 });
    const err = await anthropicError(client.messages.create(body as never, fault('stall=2000')));
    expect(err).toBeInstanceOf(Anthropic.APIConnectionTimeoutError);
  });

  it('streams slowly: events arrive at the asked pace', async () => {
    const times: number[] = [];
    const stream = h.anthropic().messages.stream(body as never, fault('slow=40'));
    stream.on('streamEvent', () => times.push(performance.now()));
    await stream.finalMessage();
    expect(times.length).toBeGreaterThan(4);
    expect((times.at(-1) as number) - (times[0] as number)).toBeGreaterThanOrEqual(40 * (times.length - 2));
  });
});

describe('fault rates', () => {
  it('applies --faults rates with a seeded draw', async () => {
    const all = createSimulator({ faults: '429@1', requireApiKey: false });
    const res = await all.fetch('/v1/messages', { method: 'POST', body: JSON.stringify(body) });
    expect(res.status).toBe(429);
    const none = createSimulator({ faults: '429@0', requireApiKey: false });
    expect((await none.fetch('/v1/messages', { method: 'POST', body: JSON.stringify(body) })).status).toBe(
      200,
    );
    const half = createSimulator({ faults: '500@0.5', requireApiKey: false, seed: 7 });
    const statuses: number[] = [];
    for (let i = 0; i < 40; i++) {
      statuses.push(
        (await half.fetch('/v1/messages', { method: 'POST', body: JSON.stringify(body) })).status,
      );
    }
    const errors = statuses.filter((s) => s === 500).length;
    expect(errors).toBeGreaterThan(5);
    expect(errors).toBeLessThan(35);
  });
});
