// POST /v1/messages and /v1/messages/count_tokens as Anthropic serves them: validation, the cache model,
// usage, diagnostics, scripted replies, JSON or SSE with every event the SDK expects. No real model runs.

import { CACHE_DIAGNOSIS_BETA } from '../cache/anthropic-diagnostics.js';
import { isPrewarm } from '../cache/anthropic-prewarm.js';
import { checkAnthropicRequest, type RuleViolation } from '../cache/anthropic-rules.js';
import { CachewardError, WireFormatError } from '../core/errors.js';
import { isObj, type Json } from '../core/json.js';
import type { Prefix } from '../prefix/build-prefix.js';
import { errorBody, errorResponse, requestIdHeader } from '../wire/provider-errors.js';
import { type Incoming, readIncoming, stallOf, streamContext } from './incoming.js';
import { pickTurn, type ScriptedTurn, unplayableOn } from './reply-script.js';
import { conversationText } from './script-match.js';
import { chunkText, type SimContext } from './sim-context.js';
import { jsonReply, type SimReply } from './sim-reply.js';
import type { SimRequest } from './sim-request.js';
import { type SseEvent, streamedResponse } from './sse-body.js';

export async function anthropicRoute(
  ctx: SimContext,
  request: SimRequest,
  countTokens: boolean,
): Promise<SimReply> {
  const incoming = await readIncoming(ctx, request, 'anthropic');
  if (incoming instanceof Response) return incoming;
  const { requestId } = incoming;
  const fail = (status: number, message: string) => {
    ctx.counters.errors++;
    return errorResponse('anthropic', status, message, requestId);
  };
  let prefix: Prefix;
  let body: Json;
  try {
    prefix = ctx.builder.parse(incoming.bytes, {
      format: 'anthropic-messages',
      headers: { 'anthropic-beta': incoming.headers.get('anthropic-beta') ?? undefined },
    });
    body = prefix.body.value();
  } catch (err) {
    if (err instanceof WireFormatError)
      return fail(400, `${err.path.replace(/^\$\.?/, '') || 'body'}: ${err.detail}`);
    if (err instanceof CachewardError) return fail(400, err.message);
    throw err;
  }
  const violation = checkAnthropicRequest(body, prefix, { countTokens });
  if (violation) return fail(violation.status, violation.message);
  if (countTokens) {
    return json({ input_tokens: prefix.totalTokens }, requestId);
  }

  // A pre-warm (max_tokens: 0) generates nothing: no scripted turn is played for it.
  const prewarm = isPrewarm(body);
  const turn: ScriptedTurn = prewarm
    ? {}
    : pickTurn(ctx.options.script, () => conversationText(body, 'anthropic'), assistantTurns(body));
  if (turn.error) return fail(turn.error.status, turn.error.message ?? 'Scripted error');
  const unplayable = unplayableOn('Messages', turn);
  if (unplayable) return fail(500, unplayable);

  const result = ctx.anthropic.evaluate(prefix, `${incoming.scope}`, incoming.start, requestId);
  if (isViolation(result)) return fail(result.status, result.message);
  ctx.countCache('anthropic', {
    hit: result.hit !== null,
    writes: result.writes.length,
    tokensRead: result.usage.cache_read_input_tokens,
    tokensWritten: result.usage.cache_creation_input_tokens,
  });

  const id = ctx.id('msg_');
  const content = prewarm ? [] : replyBlocks(ctx, turn);
  const outputTokens = prewarm ? 0 : Math.max(1, Math.ceil(JSON.stringify(content).length / 4));
  const stopReason = prewarm
    ? 'max_tokens'
    : (turn.stop_reason ?? (turn.tool_calls?.length ? 'tool_use' : 'end_turn'));
  const usage = { ...result.usage, output_tokens: outputTokens, service_tier: 'standard' };

  const betas = new Set(prefix.body.betas);
  let diagnostics: unknown;
  const asked = betas.has(CACHE_DIAGNOSIS_BETA) && isObj(body.diagnostics);
  if (asked) {
    const prev = (body.diagnostics as Json).previous_message_id;
    diagnostics = ctx.anthropicDiagnostics.compare(
      typeof prev === 'string' ? prev : null,
      prefix,
      incoming.start,
      incoming.scope,
    );
  }
  if (betas.has(CACHE_DIAGNOSIS_BETA))
    ctx.anthropicDiagnostics.remember(id, prefix, incoming.start, incoming.scope);

  const message: Json = {
    id,
    type: 'message',
    role: 'assistant',
    model: body.model,
    content,
    stop_reason: stopReason,
    stop_sequence: null,
    usage,
  };
  if (asked) message.diagnostics = diagnostics ?? null;

  await ctx.sleep(stallOf(incoming.faults) + (turn.delay_ms ?? 0));
  // The client gave up during the stall: nobody will read a reply, and nothing becomes readable.
  if (incoming.signal.aborted) {
    ctx.counters.abandoned++;
    return new Response(null, { status: 499 });
  }
  // The first byte goes out now: what this request wrote becomes readable.
  ctx.anthropic.responseBegan(result, ctx.clock.now());

  if (body.stream !== true) return json(message, requestId);
  return stream(ctx, incoming, message, content);
}

function isViolation(v: object): v is RuleViolation {
  return 'status' in v && 'message' in v;
}

function json(value: unknown, requestId: string): SimReply {
  return jsonReply(JSON.stringify(value), 200, requestIdHeader('anthropic', requestId));
}

function stream(ctx: SimContext, incoming: Incoming, message: Json, content: Json[]): Response {
  const usage = message.usage as Json;
  const events: SseEvent[] = [];
  const start: Json = {
    ...message,
    content: [],
    stop_reason: null,
    stop_sequence: null,
    usage: { ...usage, output_tokens: 1 },
  };
  events.push({ event: 'message_start', data: { type: 'message_start', message: start } });
  content.forEach((block, index) => {
    if (block.type === 'text') {
      events.push({
        event: 'content_block_start',
        data: { type: 'content_block_start', index, content_block: { type: 'text', text: '' } },
      });
      if (index === 0) events.push({ event: 'ping', data: { type: 'ping' } });
      for (const text of chunkText(String(block.text), ctx.options.streamChunkChars)) {
        events.push({
          event: 'content_block_delta',
          data: { type: 'content_block_delta', index, delta: { type: 'text_delta', text } },
        });
      }
    } else if (block.type === 'thinking') {
      events.push({
        event: 'content_block_start',
        data: {
          type: 'content_block_start',
          index,
          content_block: { type: 'thinking', thinking: '', signature: '' },
        },
      });
      for (const thinking of chunkText(String(block.thinking), ctx.options.streamChunkChars)) {
        events.push({
          event: 'content_block_delta',
          data: { type: 'content_block_delta', index, delta: { type: 'thinking_delta', thinking } },
        });
      }
      events.push({
        event: 'content_block_delta',
        data: {
          type: 'content_block_delta',
          index,
          delta: { type: 'signature_delta', signature: block.signature },
        },
      });
    } else {
      events.push({
        event: 'content_block_start',
        data: {
          type: 'content_block_start',
          index,
          content_block: { type: 'tool_use', id: block.id, name: block.name, input: {} },
        },
      });
      for (const partial_json of chunkText(JSON.stringify(block.input), ctx.options.streamChunkChars)) {
        events.push({
          event: 'content_block_delta',
          data: { type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json } },
        });
      }
    }
    events.push({ event: 'content_block_stop', data: { type: 'content_block_stop', index } });
  });
  const { service_tier: _tier, cache_creation: _split, ...cumulative } = usage;
  events.push({
    event: 'message_delta',
    data: {
      type: 'message_delta',
      delta: { stop_reason: message.stop_reason, stop_sequence: null },
      usage: cumulative,
    },
  });
  events.push({ event: 'message_stop', data: { type: 'message_stop' } });
  return streamedResponse(
    streamContext(ctx, incoming),
    events,
    { event: 'error', data: errorBody('anthropic', 529, 'Overloaded', incoming.requestId) },
    3,
  );
}

function replyBlocks(ctx: SimContext, turn: ScriptedTurn): Json[] {
  const blocks: Json[] = [];
  if (turn.thinking !== undefined)
    blocks.push({ type: 'thinking', thinking: turn.thinking, signature: 'c2ltdWxhdGVk' });
  if (turn.text !== undefined) blocks.push({ type: 'text', text: turn.text });
  for (const call of turn.tool_calls ?? []) {
    blocks.push({
      type: 'tool_use',
      id: call.id ?? ctx.id('toolu_'),
      name: call.name,
      input: call.input ?? {},
    });
  }
  if (!blocks.length) blocks.push({ type: 'text', text: '' });
  return blocks;
}

function assistantTurns(body: Json): number {
  const messages = Array.isArray(body.messages) ? body.messages : [];
  return messages.filter((m) => isObj(m) && m.role === 'assistant').length;
}
