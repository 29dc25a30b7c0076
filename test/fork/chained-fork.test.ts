// Fork parity for Responses chains: a fork sent with previous_response_id = the parent's response id is the
// parent's conversation continued on the provider's side, so it reads everything the parent cached.
// Through the official `openai` SDK against the simulator.

import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { VirtualClock } from '../../src/core/clock.js';
import { forkRequest, verifyForkParity } from '../../src/fork/fork-request.js';
import { createSimulator } from '../../src/sim/simulator.js';
import { filler } from '../sim/helpers.js';

type Json = Record<string, unknown>;

async function client() {
  const sim = createSimulator({ clock: new VirtualClock() });
  const url = await sim.listen();
  const openai = new OpenAI({
    apiKey: 'cacheward-test-openai-key-fork',
    baseURL: `${url}/v1`,
    maxRetries: 0,
  });
  return { sim, openai };
}

const instructions = filler(800, 3);
const usage = (r: { usage?: unknown }) =>
  r.usage as { input_tokens: number; input_tokens_details: { cached_tokens: number } };

describe('a fork chained on a chained parent', () => {
  it('is parity-equal to the chain and reads everything the parent cached', async () => {
    const { sim, openai } = await client();
    try {
      const first = await openai.responses.create({
        model: 'gpt-5.6',
        instructions,
        input: filler(600, 4),
      });
      const parentBody: Json = {
        model: 'gpt-5.6',
        instructions,
        previous_response_id: first.id,
        input: [{ role: 'user', content: filler(500, 5) }],
      };
      const parent = await openai.responses.create(parentBody as never);
      const fork = forkRequest(
        { format: 'openai-responses', body: parentBody, responseId: parent.id },
        'Review what was done.',
        { chain: true, requireParity: true },
      );
      expect(fork.parity).toMatchObject({ ok: true, problems: [] });
      expect(fork.body).toMatchObject({ previous_response_id: parent.id, instructions });
      expect(fork.body.input).toEqual([{ role: 'user', content: 'Review what was done.' }]);
      // With the parent's reply known, parity holds the same way.
      expect(
        verifyForkParity(
          { format: 'openai-responses', body: parentBody, responseId: parent.id, reply: parent.output },
          { body: fork.bytes, headers: {} },
        ).ok,
      ).toBe(true);
      const forked = await openai.responses.create(fork.body as never);
      // The parent wrote its whole chained prefix; the fork reads all of it.
      expect(usage(forked).input_tokens_details.cached_tokens).toBe(usage(parent).input_tokens);
    } finally {
      await sim.close();
    }
  });

  it('names what breaks parity: changed instructions, or a chain on some other response', () => {
    const parentBody: Json = {
      model: 'gpt-5.6',
      instructions,
      previous_response_id: 'resp_0',
      input: [{ role: 'user', content: 'go on' }],
    };
    const parent = { format: 'openai-responses' as const, body: parentBody, responseId: 'resp_1' };
    const fork = forkRequest(parent, 'Review.', { chain: true });
    const edited = verifyForkParity(parent, {
      body: { ...fork.body, instructions: `${instructions} and more` },
      headers: {},
    });
    expect(edited.ok).toBe(false);
    expect(edited.fields).toEqual(['instructions']);
    expect(edited.divergence?.level).toBe('system');
    const elsewhere = verifyForkParity(parent, {
      body: { ...fork.body, previous_response_id: 'resp_other' },
      headers: {},
    });
    expect(elsewhere.ok).toBe(false);
    expect(elsewhere.fields).toContain('previous_response_id');
    expect(() =>
      forkRequest({ format: 'openai-responses', body: parentBody }, 'Review.', { chain: true }),
    ).toThrow(/parent\.responseId/);
    expect(() =>
      forkRequest(
        { format: 'anthropic-messages', body: { model: 'claude-opus-5', messages: [] } },
        'Review.',
        { chain: true },
      ),
    ).toThrow(expect.objectContaining({ code: 'CW_FORK_CHAIN' }));
  });
});
