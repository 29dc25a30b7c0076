// POST /v1/chat/completions and /v1/responses as OpenAI serves them: validation, the cache model, usage,
// diagnostics, scripted replies, JSON or SSE chunks/events the SDK parses. No real model runs.

import type { OpenAICacheResult } from '../cache/openai-cache.js';
import { checkOpenAIFieldTypes } from '../cache/openai-field-types.js';
import { openaiHasDiagnostics, resolveOpenAIRetention } from '../cache/openai-rules.js';
import { CachewardError, WireFormatError } from '../core/errors.js';
import { isObj, type Json } from '../core/json.js';
import type { Prefix } from '../prefix/build-prefix.js';
import { errorBody, errorResponse, requestIdHeader } from '../wire/provider-errors.js';
import { addEncryptedReasoning } from './encrypted-reasoning.js';
import { type Incoming, readIncoming, stallOf, streamContext } from './incoming.js';
import { pickTurn, type ScriptedTurn, unplayableOn } from './reply-script.js';
import { resolveChain, storeResponse } from './response-chain.js';
import { isToolCallItem, toolCallEvents, toolCallItem } from './responses-tool-calls.js';
import { conversationText } from './script-match.js';
import { chunkText, type SimContext } from './sim-context.js';
import { type SseEvent, streamedResponse } from './sse-body.js';

type Kind = 'chat' | 'responses';

interface Prepared {
  incoming: Incoming;
  prefix: Prefix;
  body: Json;
  turn: ScriptedTurn;
  result: OpenAICacheResult;
}

async function prepare(ctx: SimContext, request: Request, kind: Kind): Promise<Prepared | Response> {
  const incoming = await readIncoming(ctx, request, 'openai');
  if (incoming instanceof Response) return incoming;
  const fail = (status: number, message: string, param: string | null = null, code?: string) => {
    ctx.counters.errors++;
    return errorResponse('openai', status, message, incoming.requestId, {}, param, code);
  };
  let prefix: Prefix;
  let body: Json;
  try {
    prefix = ctx.builder.parse(incoming.bytes, {
      format: kind === 'chat' ? 'openai-chat' : 'openai-responses',
    });
    body = prefix.body.value();
  } catch (err) {
    if (err instanceof WireFormatError) {
      const param = err.path.replace(/^\$\.?/, '');
      return fail(400, `Invalid request: ${param || 'body'}: ${err.detail}`, param || null);
    }
    if (err instanceof CachewardError) {
      return fail(400, `We could not parse the JSON body of your request. (${err.message})`);
    }
    throw err;
  }
  const typed = checkOpenAIFieldTypes(body, kind);
  if (typed) return fail(400, typed.message, typed.param);
  if (typeof body.model !== 'string' || !body.model)
    return fail(400, "Missing required parameter: 'model'.", 'model');
  if (kind === 'chat') {
    if (!Array.isArray(body.messages) || body.messages.length === 0) {
      return fail(400, "Missing required parameter: 'messages'.", 'messages');
    }
    for (const [i, m] of body.messages.entries()) {
      const role = isObj(m) ? m.role : undefined;
      if (!['system', 'developer', 'user', 'assistant', 'tool', 'function'].includes(String(role))) {
        return fail(
          400,
          `Invalid value: '${String(role)}'. Supported values are: 'system', 'developer', 'user', 'assistant', 'tool', and 'function'.`,
          `messages[${i}].role`,
        );
      }
      if (role === 'tool' && typeof (m as Json).tool_call_id !== 'string') {
        return fail(
          400,
          `Missing required parameter: 'messages[${i}].tool_call_id'.`,
          `messages[${i}].tool_call_id`,
        );
      }
    }
  } else if (body.input === undefined && body.previous_response_id === undefined) {
    return fail(400, "Missing required parameter: 'input'.", 'input');
  }
  if (kind === 'responses') {
    // A previous_response_id chain: the cache sees the whole conversation (response-chain.ts).
    const whole = resolveChain(ctx, prefix, body, incoming);
    if ('code' in whole) return fail(400, whole.message, whole.param, whole.code);
    prefix = whole;
  }
  const retention = resolveOpenAIRetention(body.model, body.prompt_cache_retention, { zdr: ctx.options.zdr });
  if ('error' in retention) return fail(400, retention.error, 'prompt_cache_retention');
  const turnIndex = kind === 'chat' ? chatTurns(body) : responsesTurns(ctx, body);
  const turn = pickTurn(ctx.options.script, conversationText(body, kind), turnIndex);
  if (turn.error) return fail(turn.error.status, turn.error.message ?? 'Scripted error');
  const unplayable = kind === 'chat' ? unplayableOn('Chat Completions', turn) : undefined;
  if (unplayable) return fail(500, unplayable);
  const options = isObj(body.prompt_cache_options) ? body.prompt_cache_options : {};
  const result = ctx.openai.evaluate(prefix, incoming.scope, incoming.start, incoming.requestId, {
    retention: retention.retention,
    ...(typeof options.mode === 'string' ? { mode: options.mode } : {}),
  });
  ctx.countCache('openai', {
    hit: result.hit !== null,
    writes: result.writes.length,
    tokensRead: result.cachedTokens,
    tokensWritten: result.cacheWriteTokens ?? 0,
  });
  return { incoming, prefix, body, turn, result };
}

/** Waits out any stall, then marks the response as begun (its writes become readable). */
async function begin(ctx: SimContext, p: Prepared): Promise<boolean> {
  await ctx.sleep(stallOf(p.incoming.faults) + (p.turn.delay_ms ?? 0));
  if (p.incoming.signal.aborted) return false;
  ctx.openai.responseBegan(p.result, ctx.clock.now());
  return true;
}

function outputTokens(turn: ScriptedTurn): number {
  return Math.max(
    1,
    Math.ceil(JSON.stringify([turn.text ?? '', turn.tool_calls ?? [], turn.thinking ?? '']).length / 4),
  );
}

function json(value: unknown, requestId: string): Response {
  return new Response(JSON.stringify(value), {
    status: 200,
    headers: { 'content-type': 'application/json', ...requestIdHeader('openai', requestId) },
  });
}

export async function chatCompletionsRoute(ctx: SimContext, request: Request): Promise<Response> {
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

export async function responsesRoute(ctx: SimContext, request: Request): Promise<Response> {
  const p = await prepare(ctx, request, 'responses');
  if (p instanceof Response) return p;
  const { incoming, body, turn, result, prefix } = p;
  const id = ctx.id('resp_');
  const output: Json[] = [];
  if (turn.thinking !== undefined) {
    output.push({
      type: 'reasoning',
      id: ctx.id('rs_'),
      summary: [{ type: 'summary_text', text: turn.thinking }],
    });
  }
  if (turn.text !== undefined || !turn.tool_calls?.length) {
    output.push({
      type: 'message',
      id: ctx.id('msg_'),
      status: 'completed',
      role: 'assistant',
      content: [{ type: 'output_text', text: turn.text ?? '', annotations: [], logprobs: [] }],
    });
  }
  for (const c of turn.tool_calls ?? []) output.push(toolCallItem(ctx, c));
  const out = outputTokens(turn);
  // ResponseUsage: `cache_write_tokens: number` is always there on Responses (0 before GPT-5.6).
  const details: Json = {
    cached_tokens: result.cachedTokens,
    cache_write_tokens: result.cacheWriteTokens ?? 0,
  };
  const reasoning = addEncryptedReasoning(output, body.include, turn.thinking, id);
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
  ctx.responseTurns.set(id, responsesTurns(ctx, body) + 1);
  if (!(await begin(ctx, p))) return new Response(null, { status: 499 });
  if (body.stream !== true) return json(response, incoming.requestId);

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
  return streamedResponse(streamContext(ctx, incoming), events, errorEvent, 2);
}

function chatTurns(body: Json): number {
  const messages = Array.isArray(body.messages) ? body.messages : [];
  return messages.filter((m) => isObj(m) && m.role === 'assistant').length;
}

/** Input items the model produced (besides assistant messages): each run of them is one assistant turn. */
const ASSISTANT_ITEMS = new Set(['function_call', 'custom_tool_call', 'tool_search_call', 'reasoning']);

/** Assistant turns in a Responses input: assistant messages and runs of function calls, plus the chain. */
function responsesTurns(ctx: SimContext, body: Json): number {
  let turns =
    typeof body.previous_response_id === 'string'
      ? (ctx.responseTurns.get(body.previous_response_id) ?? 0)
      : 0;
  const input = Array.isArray(body.input) ? body.input : [];
  let inAssistantRun = false;
  for (const item of input) {
    const assistant = isObj(item) && (item.role === 'assistant' || ASSISTANT_ITEMS.has(String(item.type)));
    if (assistant && !inAssistantRun) turns++;
    inAssistantRun = assistant;
  }
  return turns;
}
