// Responses sessions sent as previous_response_id chains: each turn after the first sends only its new
// input and names the previous response; the report must read them as the whole conversation. Pure, seeded.

import type { Json } from './conversation.js';
import { type EventDef, linear, type SessionSpec, session } from './event-shapes.js';
import type { PlannedRequest } from './session.js';

const responses = (_scheme: string, format: string) => format === 'responses';

/**
 * Marks every turn after the first as chained on the one before: the sender keeps only the input after
 * the previous turn's input and its reply (which the provider holds) and sets previous_response_id.
 */
function chained(requests: PlannedRequest[]): PlannedRequest[] {
  for (let i = 1; i < requests.length; i++) {
    const prev = (requests[i - 1] as PlannedRequest).body.input as Json[];
    const plan = requests[i] as PlannedRequest;
    const input = plan.body.input as Json[];
    // The reply the plan holds stands where the provider puts the response's own output.
    if (input[prev.length]?.role !== 'assistant')
      throw new Error(`${plan.session}: a chained turn must follow the previous turn's reply`);
    plan.chain = { after: prev.length + 1 };
  }
  return requests;
}

function chainSession(spec: SessionSpec, event: string) {
  const s = session(spec, event, { style: 'plain' });
  // Responses are stored (the corpus sends store: false otherwise); every step a text reply and a question.
  s.conv.fields.store = true;
  s.kinds.push(...Array<'chat'>(12).fill('chat'));
  return s;
}

export const chainEvents: EventDef[] = [
  {
    name: 'responses_chain',
    applies: responses,
    build: (spec) =>
      chained(linear(chainSession(spec, 'responses_chain'), () => ({ expect: null, idleMs: 20_000 }))),
  },
  {
    name: 'responses_chain_instructions',
    applies: responses,
    build: (spec) =>
      chained(
        linear(chainSession(spec, 'responses_chain_instructions'), (s) => {
          s.step();
          s.conv.system = `${s.conv.system} Answer in French from now on.`;
          return { expect: 'system_changed', stepped: true };
        }),
      ),
  },
];
