// POST /v1/responses as OpenAI serves it: the response object, usage, prompt-cache diagnostics, the stored
// chain, scripted replies. No real model runs; validation and the cache model are openai-request.ts.

import { openaiHasDiagnostics } from '../cache/openai-rules.js';
import { isObj, type Json } from '../core/json.js';
import { streamContext } from './incoming.js';
import { begin, json, outputTokens, prepare, responsesTurns } from './openai-request.js';
import { addEncryptedReasoning } from './reasoning-output.js';
import { storeResponse } from './response-chain.js';
import { responseEvents } from './responses-events.js';
import { toolCallItem } from './responses-tool-calls.js';
import type { SimContext } from './sim-context.js';
import type { SimReply } from './sim-reply.js';
import type { SimRequest } from './sim-request.js';
import { streamedResponse } from './sse-body.js';

/** Over a WebSocket (`transport` 'websocket') the response is always streamed: `stream` is implicit there. */
export async function responsesRoute(
  ctx: SimContext,
  request: SimRequest,
  transport: 'http' | 'websocket' = 'http',
): Promise<SimReply> {
  const p = await prepare(ctx, request, 'responses');
  if (p instanceof Response) return p;
  const { incoming, body, turn, result, prefix } = p;
  const id = ctx.id('resp_');
  const output: Json[] = [];
  // A warm-up (`generate: false`): the input is cached and the response has no output.
  const generate = body.generate !== false;
  if (generate && turn.thinking !== undefined) {
    output.push({
      type: 'reasoning',
      id: ctx.id('rs_'),
      summary: [{ type: 'summary_text', text: turn.thinking }],
    });
  }
  if (generate && (turn.text !== undefined || !turn.tool_calls?.length)) {
    output.push({
      type: 'message',
      id: ctx.id('msg_'),
      status: 'completed',
      role: 'assistant',
      content: [{ type: 'output_text', text: turn.text ?? '', annotations: [], logprobs: [] }],
    });
  }
  if (generate) for (const c of turn.tool_calls ?? []) output.push(toolCallItem(ctx, c));
  const out = generate ? outputTokens(turn) : 0;
  // ResponseUsage: `cache_write_tokens: number` is always there on Responses (0 before GPT-5.6).
  const details: Json = {
    cached_tokens: result.cachedTokens,
    cache_write_tokens: result.cacheWriteTokens ?? 0,
  };
  const reasoning = generate ? addEncryptedReasoning(output, body.include, turn.thinking, id) : 0;
  const usage = {
    input_tokens: result.totalTokens,
    input_tokens_details: details,
    output_tokens: out,
    output_tokens_details: { reasoning_tokens: reasoning },
    total_tokens: result.totalTokens + out,
  };
  const serviceTier =
    typeof body.service_tier === 'string' && body.service_tier !== 'auto' ? body.service_tier : 'default';
  const options = isObj(body.prompt_cache_options) ? body.prompt_cache_options : undefined;
  const comparison = options?.comparison_response_id;
  const response: Json = {
    id,
    object: 'response',
    created_at: Math.floor(ctx.clock.now() / 1000),
    status: 'completed',
    background: false,
    error: null,
    incomplete_details: null,
    instructions: body.instructions ?? null,
    max_output_tokens: body.max_output_tokens ?? null,
    metadata: body.metadata ?? {},
    model: body.model,
    output,
    parallel_tool_calls: body.parallel_tool_calls ?? true,
    previous_response_id: body.previous_response_id ?? null,
    prompt_cache_key: body.prompt_cache_key ?? null,
    reasoning: { effort: (isObj(body.reasoning) ? body.reasoning.effort : undefined) ?? null, summary: null },
    service_tier: serviceTier,
    store: body.store ?? true,
    temperature: body.temperature ?? 1,
    text: isObj(body.text) ? body.text : { format: { type: 'text' }, verbosity: 'medium' },
    tool_choice: body.tool_choice ?? 'auto',
    tools: body.tools ?? [],
    top_p: body.top_p ?? 1,
    truncation: body.truncation ?? 'disabled',
    usage,
    user: null,
  };
  if (typeof comparison === 'string') {
    // Diagnostics exist only on GPT-5.6 and later; earlier models get `unavailable`.
    response.prompt_cache_diagnostics = openaiHasDiagnostics(prefix.model)
      ? ctx.openaiDiagnostics.compare(comparison, prefix, serviceTier, incoming.start)
      : { type: 'unavailable' };
  }
  ctx.openaiDiagnostics.remember(id, prefix, serviceTier, incoming.start);
  storeResponse(ctx, id, prefix, body, output, incoming);
  ctx.responseTurns.set(id, responsesTurns(ctx, body) + (generate ? 1 : 0));
  if (!(await begin(ctx, p))) return new Response(null, { status: 499 });
  if (body.stream !== true && transport === 'http') return json(response, incoming.requestId);
  return streamedResponse(streamContext(ctx, incoming), ...responseEvents(ctx, response, output), 2);
}
