// POST /v1/chat/completions as OpenAI serves it: the completion or its chunks, usage with cached tokens,
// scripted text and tool calls. No real model runs; validation and the cache model are openai-request.ts.

import { isObj, type Json } from '../core/json.js';
import { errorBody } from '../wire/provider-errors.js';
import { streamContext } from './incoming.js';
import { begin, json, outputTokens, prepare } from './openai-request.js';
import { chunkText, type SimContext } from './sim-context.js';
import type { SimReply } from './sim-reply.js';
import type { SimRequest } from './sim-request.js';
import { type SseEvent, streamedResponse } from './sse-body.js';

export async function chatCompletionsRoute(ctx: SimContext, request: SimRequest): Promise<SimReply> {
  const p = await prepare(ctx, request, 'chat');
  if (p instanceof Response) return p;
  const { incoming, body, turn, result } = p;
  const id = ctx.id('chatcmpl-');
  const created = Math.floor(ctx.clock.now() / 1000);
  const toolCalls = (turn.tool_calls ?? []).map((c) => ({
    id: c.id ?? ctx.id('call_'),
    type: 'function',
    function: { name: c.name, arguments: JSON.stringify(c.input ?? {}) },
  }));
  const finish = turn.stop_reason ?? (toolCalls.length ? 'tool_calls' : 'stop');
  const completion = outputTokens(turn);
  const details: Json = { cached_tokens: result.cachedTokens, audio_tokens: 0 };
  if (result.cacheWriteTokens !== undefined) details.cache_write_tokens = result.cacheWriteTokens;
  const usage = {
    prompt_tokens: result.totalTokens,
    completion_tokens: completion,
    total_tokens: result.totalTokens + completion,
    prompt_tokens_details: details,
    completion_tokens_details: {
      reasoning_tokens: 0,
      audio_tokens: 0,
      accepted_prediction_tokens: 0,
      rejected_prediction_tokens: 0,
    },
  };
  const head = {
    id,
    object: 'chat.completion',
    created,
    model: body.model,
    service_tier: 'default',
    system_fingerprint: 'fp_cacheward',
  };
  if (!(await begin(ctx, p))) return new Response(null, { status: 499 });
  if (body.stream !== true) {
    const message: Json = {
      role: 'assistant',
      content: turn.text ?? (toolCalls.length ? null : ''),
      refusal: null,
      annotations: [],
    };
    if (toolCalls.length) message.tool_calls = toolCalls;
    return json(
      { ...head, choices: [{ index: 0, message, logprobs: null, finish_reason: finish }], usage },
      incoming.requestId,
    );
  }
  const withUsage = isObj(body.stream_options) && body.stream_options.include_usage === true;
  const chunk = (delta: Json, finishReason: string | null = null): SseEvent => ({
    data: {
      ...head,
      object: 'chat.completion.chunk',
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }],
      ...(withUsage ? { usage: null } : {}),
    },
  });
  const events: SseEvent[] = [chunk({ role: 'assistant', content: '', refusal: null })];
  for (const text of turn.text ? chunkText(turn.text, ctx.options.streamChunkChars) : [])
    events.push(chunk({ content: text }));
  toolCalls.forEach((call, index) => {
    events.push(
      chunk({
        tool_calls: [
          { index, id: call.id, type: 'function', function: { name: call.function.name, arguments: '' } },
        ],
      }),
    );
    for (const args of chunkText(call.function.arguments, ctx.options.streamChunkChars)) {
      events.push(chunk({ tool_calls: [{ index, function: { arguments: args } }] }));
    }
  });
  events.push(chunk({}, finish));
  if (withUsage) events.push({ data: { ...head, object: 'chat.completion.chunk', choices: [], usage } });
  events.push({ data: '[DONE]' });
  return streamedResponse(
    streamContext(ctx, incoming),
    events,
    {
      data: errorBody(
        'openai',
        500,
        'The server had an error while processing your request.',
        incoming.requestId,
      ),
    },
    2,
  );
}
