// The simulator's side of `previous_response_id` and `store`: a chained request is made whole (the stored
// context, then its own input) before it is cached and counted, and a stored response is remembered. A
// chain it does not know is an error to the client, never a guess.

import type { Json } from '../core/json.js';
import type { Prefix } from '../prefix/build-prefix.js';
import { chainedBody } from '../prefix/chained-prefix.js';
import type { Incoming } from './incoming.js';
import type { SimContext } from './sim-context.js';

/** The 400 for an id that cannot be resolved (error-codes.md: `previous_response_not_found`). */
export interface ChainError {
  message: string;
  param: 'previous_response_id';
  code: 'previous_response_not_found';
}

/**
 * The prefix the cache sees for a Responses request: as sent, or for a request with `previous_response_id`
 * the whole conversation (the stored response's input and output items, then the new input), which caches
 * like a resent conversation. An id unknown to this API key, expired, or stored with `store: false` is
 * the documented `previous_response_not_found`, unless it is the latest response of the same WebSocket.
 */
export function resolveChain(
  ctx: SimContext,
  prefix: Prefix,
  body: Json,
  incoming: Incoming,
): Prefix | ChainError {
  const id = body.previous_response_id;
  if (typeof id !== 'string') return prefix;
  const context =
    incoming.local?.context(id, incoming.scope, incoming.start) ??
    ctx.responses.context(id, incoming.scope, incoming.start);
  if (!context) {
    return {
      message: `Previous response with id '${id}' not found.`,
      param: 'previous_response_id',
      code: 'previous_response_not_found',
    };
  }
  return ctx.builder.parse(chainedBody(prefix.body, [context]), { format: 'openai-responses' });
}

/**
 * Keeps a response for later chains, unless the request said `store: false`; over a WebSocket it is also
 * the connection's latest, whatever `store` says. `prefix` is the whole one.
 */
export function storeResponse(
  ctx: SimContext,
  id: string,
  prefix: Prefix,
  body: Json,
  output: readonly unknown[],
  incoming: Incoming,
): void {
  incoming.local?.put(id, incoming.scope, prefix.body, output, incoming.start);
  if (body.store === false) return;
  ctx.responses.put(id, incoming.scope, prefix.body, output, incoming.start);
}
