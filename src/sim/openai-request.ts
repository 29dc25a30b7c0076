// Reads and validates one OpenAI request as OpenAI does (400s with its messages and params), resolves a
// previous_response_id chain, picks the scripted turn and runs the cache model. It never builds a reply body.

import type { OpenAICacheResult } from '../cache/openai-cache.js';
import { checkOpenAIFieldTypes } from '../cache/openai-field-types.js';
import { resolveOpenAIRetention } from '../cache/openai-rules.js';
import { CachewardError, WireFormatError } from '../core/errors.js';
import { isObj, type Json } from '../core/json.js';
import type { Prefix } from '../prefix/build-prefix.js';
import { errorResponse, requestIdHeader } from '../wire/provider-errors.js';
import { type Incoming, readIncoming, stallOf } from './incoming.js';
import { pickTurn, type ScriptedTurn, unplayableOn } from './reply-script.js';
import { resolveChain } from './response-chain.js';
import { conversationText } from './script-match.js';
import type { SimContext } from './sim-context.js';
import { jsonReply, type SimReply } from './sim-reply.js';
import type { SimRequest } from './sim-request.js';

export type Kind = 'chat' | 'responses';

export interface Prepared {
  incoming: Incoming;
  prefix: Prefix;
  body: Json;
  turn: ScriptedTurn;
  result: OpenAICacheResult;
}

export async function prepare(
  ctx: SimContext,
  request: SimRequest,
  kind: Kind,
): Promise<Prepared | Response> {
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
  // A chained request is matched on its whole conversation (the context it continues, then its input):
  // Codex over WebSocket sends only the new items after its first request.
  const matched =
    kind === 'responses' && body.previous_response_id !== undefined ? prefix.body.value() : body;
  const turn = pickTurn(ctx.options.script, () => conversationText(matched, kind), turnIndex);
  // `generate: false` (a Responses warm-up) prepares the context and produces nothing: no turn plays.
  if (turn.error && body.generate !== false)
    return fail(turn.error.status, turn.error.message ?? 'Scripted error');
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
export async function begin(ctx: SimContext, p: Prepared): Promise<boolean> {
  await ctx.sleep(stallOf(p.incoming.faults) + (p.turn.delay_ms ?? 0));
  if (p.incoming.signal.aborted) {
    ctx.counters.abandoned++;
    return false;
  }
  ctx.openai.responseBegan(p.result, ctx.clock.now());
  return true;
}

export function outputTokens(turn: ScriptedTurn): number {
  return Math.max(
    1,
    Math.ceil(JSON.stringify([turn.text ?? '', turn.tool_calls ?? [], turn.thinking ?? '']).length / 4),
  );
}

export function json(value: unknown, requestId: string): SimReply {
  return jsonReply(JSON.stringify(value), 200, requestIdHeader('openai', requestId));
}

export function chatTurns(body: Json): number {
  const messages = Array.isArray(body.messages) ? body.messages : [];
  return messages.filter((m) => isObj(m) && m.role === 'assistant').length;
}

/** Input items the model produced (besides assistant messages): each run of them is one assistant turn. */
const ASSISTANT_ITEMS = new Set(['function_call', 'custom_tool_call', 'tool_search_call', 'reasoning']);

/** Assistant turns in a Responses input: assistant messages and runs of function calls, plus the chain. */
export function responsesTurns(ctx: SimContext, body: Json): number {
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
