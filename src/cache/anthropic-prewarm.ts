// `max_tokens: 0` pre-warms the cache (create.md; prompt-caching.md, "Pre-warming the cache"): the prompt is
// read and written at its breakpoints, nothing is generated. Pure: the rules and the reply, no I/O.

import { isObj, type Json } from '../core/json.js';
import { invalidRequest as bad, type RuleViolation } from './rule-violation.js';

/** Whether a (valid) request is a pre-warm: `max_tokens: 0`. */
export function isPrewarm(body: Json): boolean {
  return body.max_tokens === 0;
}

/**
 * `max_tokens` itself (a non-negative integer; `count_tokens` needs none), then the documented 400s of a
 * pre-warm: "A `max_tokens: 0` request is rejected with an `invalid_request_error` if any of the following
 * are set, since each implies output that a zero-token budget cannot produce" — `stream: true`, extended
 * thinking (`thinking.type: "enabled"`), structured outputs (`output_config.format`), `tool_choice` of
 * type `tool` or `any`. The wording of each message is a model choice.
 */
export function checkMaxTokens(body: Json, countTokens: boolean): RuleViolation | undefined {
  const v = body.max_tokens;
  if (countTokens && v === undefined) return undefined;
  if (v === undefined || v === null) return bad('max_tokens: Field required');
  if (typeof v !== 'number' || !Number.isInteger(v))
    return bad('max_tokens: Input should be a valid integer');
  if (v < 0) return bad('max_tokens: Input should be greater than or equal to 0');
  if (v !== 0 || countTokens) return undefined;
  const why = (what: string) =>
    bad(
      `max_tokens: 0 (a cache pre-warm) cannot be combined with ${what}: it implies output a zero-token budget cannot produce`,
    );
  if (body.stream === true) return why('stream: true');
  if (isObj(body.thinking) && body.thinking.type === 'enabled')
    return why('extended thinking (thinking.type: "enabled")');
  if (
    isObj(body.output_config) &&
    body.output_config.format !== undefined &&
    body.output_config.format !== null
  )
    return why('structured outputs (output_config.format)');
  if (body.output_format !== undefined && body.output_format !== null)
    return why('structured outputs (output_format)');
  if (isObj(body.tool_choice) && (body.tool_choice.type === 'tool' || body.tool_choice.type === 'any'))
    return why(`tool_choice of type "${String(body.tool_choice.type)}"`);
  return undefined;
}
