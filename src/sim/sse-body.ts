// A streamed response body: SSE events paced as asked, with a mid-stream error event or a reset injected.
// It stops producing as soon as the client goes away; it never buffers the whole stream.

/** One event to send: its `event:` name (omit for OpenAI Chat chunks) and its data. */
export interface SseEvent {
  event?: string;
  data: unknown;
}

/** How to play the stream. `errorAt` / `resetAt` count events sent before the fault. */
export interface SsePlan {
  events: SseEvent[];
  pauseMs: number;
  errorAt?: { index: number; event: SseEvent };
  resetAt?: number;
  sleep: (ms: number) => Promise<void>;
}

const encoder = new TextEncoder();

export function encodeSse(e: SseEvent): Uint8Array {
  const data = typeof e.data === 'string' ? e.data : JSON.stringify(e.data);
  return encoder.encode(`${e.event ? `event: ${e.event}\n` : ''}data: ${data}\n\n`);
}

/** A ReadableStream of the plan's events, pulled (so backpressure holds) and cancellable. */
export function sseStream(plan: SsePlan): ReadableStream<Uint8Array> {
  let i = 0;
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (i > 0 && plan.pauseMs > 0) await plan.sleep(plan.pauseMs);
      if (plan.resetAt !== undefined && i >= plan.resetAt) {
        controller.error(new Error('simulated connection reset mid-stream'));
        return;
      }
      if (plan.errorAt && i >= plan.errorAt.index) {
        controller.enqueue(encodeSse(plan.errorAt.event));
        controller.close();
        return;
      }
      const next = plan.events[i++];
      if (!next) {
        controller.close();
        return;
      }
      controller.enqueue(encodeSse(next));
    },
  });
}

/** What a streamed route needs to answer: the request's faults and id, and how to sleep. */
export interface StreamContext {
  provider: 'anthropic' | 'openai';
  requestId: string;
  pauseMs: number;
  errorMidStream: boolean;
  resetMidStream: boolean;
  sleep: (ms: number) => Promise<void>;
}

/**
 * The SSE Response of a route: the events paced by a `slow` fault, an error event or a reset after the
 * first `faultAt` events when asked.
 */
export function streamedResponse(
  c: StreamContext,
  events: SseEvent[],
  errorEvent: SseEvent,
  faultAt: number,
): Response {
  const at = Math.min(faultAt, events.length - 1);
  const plan: SsePlan = {
    events,
    pauseMs: c.pauseMs,
    sleep: c.sleep,
    ...(c.errorMidStream ? { errorAt: { index: at, event: errorEvent } } : {}),
    ...(c.resetMidStream ? { resetAt: at } : {}),
  };
  return new Response(sseStream(plan), {
    status: 200,
    headers: {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      ...(c.provider === 'anthropic' ? { 'request-id': c.requestId } : { 'x-request-id': c.requestId }),
    },
  });
}
