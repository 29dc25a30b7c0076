// Scripted tool calls as the Responses API sends them: `function_call` (namespaced or not),
// `custom_tool_call` (freeform input) and client-executed `tool_search_call`, whole and as SSE events.
// Shapes follow the openai SDK's Response types; it never invents fields the API does not send.

import type { Json } from '../core/json.js';
import type { ScriptedToolCall } from './reply-script.js';
import type { SimContext } from './sim-context.js';
import { chunkText } from './sim-context.js';
import type { SseEvent } from './sse-body.js';

/** The output item a scripted call becomes. */
export function toolCallItem(ctx: SimContext, call: ScriptedToolCall): Json {
  const callId = call.id ?? ctx.id('call_');
  const ns = call.namespace === undefined ? {} : { namespace: call.namespace };
  if (call.type === 'custom') {
    return {
      type: 'custom_tool_call',
      id: ctx.id('ctc_'),
      status: 'completed',
      call_id: callId,
      name: call.name,
      ...ns,
      input: typeof call.input === 'string' ? call.input : '',
    };
  }
  if (call.type === 'tool_search') {
    return {
      type: 'tool_search_call',
      id: ctx.id('tsc_'),
      call_id: callId,
      execution: 'client',
      status: 'completed',
      arguments: call.input ?? {},
    };
  }
  return {
    type: 'function_call',
    id: ctx.id('fc_'),
    call_id: callId,
    name: call.name,
    ...ns,
    arguments: JSON.stringify(call.input ?? {}),
    status: 'completed',
  };
}

/** A stream event factory that numbers events (`sequence_number`) in the route's order. */
export type EventOf = (type: string, data: Json) => SseEvent;

/**
 * The events of one tool-call item from `output_item.added` to `output_item.done`: the item first with
 * empty arguments or input, then its deltas and the matching `.done` event.
 */
export function toolCallEvents(item: Json, outputIndex: number, ev: EventOf, chunkChars: number): SseEvent[] {
  const output_index = outputIndex;
  const item_id = item.id;
  const events: SseEvent[] = [];
  if (item.type === 'function_call') {
    events.push(
      ev('response.output_item.added', {
        output_index,
        item: { ...item, arguments: '', status: 'in_progress' },
      }),
    );
    for (const delta of chunkText(String(item.arguments), chunkChars)) {
      events.push(ev('response.function_call_arguments.delta', { item_id, output_index, delta }));
    }
    events.push(
      ev('response.function_call_arguments.done', { item_id, output_index, arguments: item.arguments }),
    );
  } else if (item.type === 'custom_tool_call') {
    events.push(
      ev('response.output_item.added', { output_index, item: { ...item, input: '', status: 'in_progress' } }),
    );
    for (const delta of chunkText(String(item.input), chunkChars)) {
      events.push(ev('response.custom_tool_call_input.delta', { item_id, output_index, delta }));
    }
    events.push(ev('response.custom_tool_call_input.done', { item_id, output_index, input: item.input }));
  } else {
    events.push(ev('response.output_item.added', { output_index, item: { ...item, status: 'in_progress' } }));
  }
  events.push(ev('response.output_item.done', { output_index, item }));
  return events;
}

/** Whether an output item is one of the tool calls above. */
export function isToolCallItem(item: Json): boolean {
  return (
    item.type === 'function_call' || item.type === 'custom_tool_call' || item.type === 'tool_search_call'
  );
}
