// Shared helpers for the simulator conformance tests: a simulator on loopback, SDK clients, and request
// bodies whose token counts come from the same prefix model the simulator uses.

import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll } from 'vitest';
import { VirtualClock } from '../../src/core/clock.js';
import { parsePrefix } from '../../src/prefix/build-prefix.js';
import { createSimulator, type Simulator, type SimulatorOptions } from '../../src/sim/simulator.js';

type Json = Record<string, unknown>;

export interface SimHarness {
  sim: Simulator;
  clock: VirtualClock;
  url: string;
  anthropic(apiKey?: string): Anthropic;
  openai(apiKey?: string): OpenAI;
}

/** A simulator on 127.0.0.1 with a virtual clock, closed after the file's tests. */
export async function startSim(options: SimulatorOptions = {}): Promise<SimHarness> {
  const clock = new VirtualClock();
  const sim = createSimulator({ clock, ...options });
  const url = await sim.listen();
  afterAll(() => sim.close());
  return {
    sim,
    clock,
    url,
    anthropic: (apiKey = 'cacheward-test-key') => new Anthropic({ apiKey, baseURL: url, maxRetries: 0 }),
    openai: (apiKey = 'sk-test-key') => new OpenAI({ apiKey, baseURL: `${url}/v1`, maxRetries: 0 }),
  };
}

/** Deterministic filler text of about `tokens` tokens under the default estimator (4 chars a token). */
export function filler(tokens: number, seed = 0): string {
  const words = ['alpha', 'bravo', 'charlie', 'delta', 'echo', 'foxtrot', 'golf', 'hotel'];
  let s = `[${seed}] `;
  let i = seed;
  while (s.length < tokens * 4) s += `${words[i++ % words.length]} `;
  return s.slice(0, tokens * 4);
}

/**
 * An Anthropic body with `n` single-block messages (user/assistant alternating, ending on user when n is
 * odd), each about `tokensEach` tokens, with markers on the given block indices.
 */
export function messagesBody(
  n: number,
  tokensEach: number,
  marks: Record<number, Json> = {},
  model = 'claude-opus-5',
): Json {
  const messages: Json[] = [];
  for (let i = 0; i < n; i++) {
    const block: Json = { type: 'text', text: filler(tokensEach, i) };
    if (marks[i]) block.cache_control = marks[i];
    messages.push({ role: i % 2 === 0 ? 'user' : 'assistant', content: [block] });
  }
  return { model, max_tokens: 64, messages };
}

/** Estimated tokens of the prefix ending at block `index` (what the simulator will count). */
export function tokensAt(body: Json, index: number, headers?: Record<string, string>): number {
  return parsePrefix(JSON.stringify(body), { format: 'anthropic-messages', ...(headers ? { headers } : {}) })
    .blocks[index]?.cumulativeTokens as number;
}

export function totalTokens(body: Json): number {
  return parsePrefix(JSON.stringify(body), { format: 'anthropic-messages' }).totalTokens;
}

export const EPHEMERAL = { type: 'ephemeral' };
export const EPHEMERAL_1H = { type: 'ephemeral', ttl: '1h' };

export type Usage = {
  input_tokens: number;
  cache_creation_input_tokens: number | null;
  cache_read_input_tokens: number | null;
  cache_creation?: { ephemeral_5m_input_tokens: number; ephemeral_1h_input_tokens: number } | null;
};

/** Sends a Messages request streaming or not and returns the final usage as the SDK parsed it. */
export async function send(
  client: Anthropic,
  body: Json,
  stream: boolean,
  headers?: Record<string, string>,
): Promise<Usage> {
  const opts = headers ? { headers } : undefined;
  if (stream) {
    const s = client.messages.stream(body as never, opts);
    return (await s.finalMessage()).usage as unknown as Usage;
  }
  return (await client.messages.create(body as never, opts)).usage as unknown as Usage;
}

export const MODES = [
  ['non-streaming', false],
  ['streaming', true],
] as const;
