// The simulator's ids: unique to each simulator, as the provider's are (two runs' transcripts must never share
// a call id), and the same in every run given one seed.

import { describe, expect, it } from 'vitest';
import { createSimulator } from '../../src/sim/simulator.js';

const body = JSON.stringify({
  model: 'claude-opus-5',
  max_tokens: 5,
  messages: [{ role: 'user', content: 'hi' }],
});

async function ids(seed?: number): Promise<{ message: string; request: string | null }> {
  const sim = createSimulator({ requireApiKey: false, ...(seed === undefined ? {} : { seed }) });
  const res = await sim.fetch('http://sim.invalid/v1/messages', {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
    body,
  });
  const message = ((await res.json()) as { id: string }).id;
  return { message, request: res.headers.get('request-id') };
}

describe('simulator ids', () => {
  it('differ between two simulators given no seed', async () => {
    const [a, b] = [await ids(), await ids()];
    expect(a.message).toMatch(/^msg_/);
    expect(a.message).not.toBe(b.message);
    expect(a.request).not.toBe(b.request);
  });

  it('are the same in two simulators given one seed', async () => {
    expect(await ids(7)).toEqual(await ids(7));
  });
});
