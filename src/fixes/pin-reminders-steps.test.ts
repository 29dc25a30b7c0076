// pin-reminders in steps reads a huge history in pieces and gives the one-step result.
// Pure: no proxy, no clock.

import { describe, expect, it } from 'vitest';
import { drainSteps, STEP_ITEMS } from '../core/steps.js';
import { PrefixBuilder } from '../prefix/build-prefix.js';
import { historyShapes, historyShapesSteps } from './anthropic-messages.js';
import { pinReminders } from './pin-reminders.js';

const ctx = {
  provider: 'anthropic' as const,
  route: '/v1/messages',
  now: 0,
  conversation: 'c',
  relation: 'new' as const,
};

/** A body of `n` messages, some of them with two blocks. */
function body(n: number): Buffer {
  const messages = Array.from({ length: n }, (_, i) => ({
    role: i % 2 ? 'assistant' : 'user',
    content:
      i % 5 === 0
        ? `message ${i}`
        : [
            { type: 'text', text: `message ${i}` },
            ...(i % 3 ? [] : [{ type: 'text', text: `<system-reminder>${i}</system-reminder>` }]),
          ],
  }));
  return Buffer.from(JSON.stringify({ model: 'claude-opus-5', max_tokens: 8, messages }));
}

/** The fix's stepped apply (it has one: that is what is tested). */
function applySteps(
  req: Parameters<typeof pinReminders.apply>[0],
  state: Parameters<typeof pinReminders.apply>[1],
) {
  const steps = pinReminders.applySteps;
  if (!steps) throw new Error('pin-reminders has no stepped apply');
  return steps(req, state, ctx);
}

function pieces<T>(steps: Generator<void, T>): { value: T; pieces: number } {
  let n = 0;
  for (;;) {
    const r = steps.next();
    n++;
    if (r.done) return { value: r.value, pieces: n };
  }
}

describe('pin-reminders in steps', () => {
  it('reads a huge history seen for the first time in pieces, with the same shapes and result', () => {
    const n = 10 * STEP_ITEMS;
    const bytes = body(n);
    const stepped = pieces(
      historyShapesSteps(new PrefixBuilder().parse(bytes, { format: 'anthropic-messages' })),
    );
    expect(stepped.pieces).toBeGreaterThanOrEqual(10);
    const fresh = historyShapes(new PrefixBuilder().parse(bytes, { format: 'anthropic-messages' }));
    expect(stepped.value).toEqual(fresh);
    expect(stepped.value).toHaveLength(n);

    const req = {
      body: bytes,
      prefix: new PrefixBuilder().parse(bytes, { format: 'anthropic-messages' }),
      headers: {},
    };
    const state = pinReminders.initialState();
    const viaSteps = pieces(applySteps(req, state));
    expect(viaSteps.pieces).toBeGreaterThan(1);
    expect(viaSteps.value).toEqual(pinReminders.apply(req, state, ctx));
    // The next turn: its state is the canonical history, and the appended body is already canonical.
    const next = body(n + 2);
    const nextReq = {
      body: next,
      prefix: new PrefixBuilder().parse(next, { format: 'anthropic-messages' }),
      headers: {},
    };
    const after = drainSteps(applySteps(nextReq, viaSteps.value.state));
    expect(after.patches).toBeUndefined();
    expect(after.state.messages).toHaveLength(n + 2);
  });
});
