// The Responses API stream for one finished response: created, in_progress, each output item's added /
// delta / done events, completed, numbered in order. It never changes the response it streams.

import type { Json } from '../core/json.js';
import { isToolCallItem, toolCallEvents } from './responses-tool-calls.js';
import { chunkText, type SimContext } from './sim-context.js';
import type { SseEvent } from './sse-body.js';

/** The SSE events of a Responses stream for a finished response, and the error event a fault sends. */
export function responseEvents(ctx: SimContext, response: Json, output: Json[]): [SseEvent[], SseEvent] {
  let seq = 0;
  const ev = (type: string, data: Json): SseEvent => ({
    event: type,
    data: { type, sequence_number: seq++, ...data },
  });
  const pending = { ...response, status: 'in_progress', output: [], usage: null };
  const events: SseEvent[] = [
    ev('response.created', { response: pending }),
    ev('response.in_progress', { response: pending }),
  ];
  output.forEach((item, output_index) => {
    if (isToolCallItem(item)) {
      events.push(...toolCallEvents(item, output_index, ev, ctx.options.streamChunkChars));
      return;
    }
    if (item.type === 'message') {
      const text = String(((item.content as Json[])[0] as Json).text);
      events.push(
        ev('response.output_item.added', {
          output_index,
          item: { ...item, status: 'in_progress', content: [] },
        }),
      );
      const part = { type: 'output_text', text: '', annotations: [], logprobs: [] };
      events.push(
        ev('response.content_part.added', { item_id: item.id, output_index, content_index: 0, part }),
      );
      for (const delta of chunkText(text, ctx.options.streamChunkChars)) {
        events.push(
          ev('response.output_text.delta', {
            item_id: item.id,
            output_index,
            content_index: 0,
            delta,
            logprobs: [],
          }),
        );
      }
      events.push(
        ev('response.output_text.done', {
          item_id: item.id,
          output_index,
          content_index: 0,
          text,
          logprobs: [],
        }),
      );
      events.push(
        ev('response.content_part.done', {
          item_id: item.id,
          output_index,
          content_index: 0,
          part: { ...part, text },
        }),
      );
    } else {
      events.push(ev('response.output_item.added', { output_index, item }));
    }
    events.push(ev('response.output_item.done', { output_index, item }));
  });
  events.push(ev('response.completed', { response }));
  const errorEvent: SseEvent = {
    event: 'error',
    data: {
      type: 'error',
      code: 'server_error',
      message: 'The server had an error while processing your request.',
      param: null,
      sequence_number: seq,
    },
  };
  return [events, errorEvent];
}
