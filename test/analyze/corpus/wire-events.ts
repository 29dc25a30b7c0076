// Requests that are no turn of anybody (count_tokens, a 400, a 429) and a turn sent twice: the conversation
// and the causes around them must not move.

import type { Format, Json } from './conversation.js';
import { always, anthropic, type EventDef, linear, session } from './event-shapes.js';

/** Breaks a body so that the simulator refuses it with a 400, as the real provider would. */
function breakBody(format: Format): (body: Json) => void {
  if (format === 'responses') return (b) => delete b.input;
  return (b) => (b.messages as Json[]).push({ role: 'robot', content: 'x' });
}

/**
 * Requests that are no turn of anybody, or a turn sent twice: the conversation and the causes around them
 * must not move. The request after them is the event (it must read everything).
 */
export const wireEvents: EventDef[] = [
  {
    name: 'count_tokens_between',
    applies: anthropic,
    build: (spec) => {
      const s = session(spec, 'count_tokens_between');
      const n = 4 + s.w.int(3);
      for (let t = 1; t <= n; t++) {
        if (t > 1) s.step();
        s.send({ expect: null }, { kind: 'count_tokens' });
        s.send({ expect: t === 1 ? 'cold_start' : null, injected: t === 2 }, { idleMs: 1_000 });
      }
      return s.requests;
    },
  },
  ...(['refused', 'rate_limited'] as const).map(
    (kind): EventDef => ({
      name: `${kind}_${kind === 'refused' ? 400 : 429}`,
      applies: always,
      build: (spec) =>
        linear(session(spec, `${kind}_${kind === 'refused' ? 400 : 429}`), (s) => {
          s.step();
          s.send(
            { expect: null },
            { kind, ...(kind === 'refused' ? { corrupt: breakBody(spec.format) } : {}) },
          );
          return { expect: null, idleMs: 2_000, stepped: true };
        }),
    }),
  ),
  {
    name: 'retry_duplicate',
    applies: always,
    build: (spec) =>
      linear(session(spec, 'retry_duplicate'), (s) => {
        s.step();
        s.send({ expect: null });
        return { expect: null, idleMs: 3_000, stepped: true };
      }),
  },
];
