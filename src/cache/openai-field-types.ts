// The OpenAI request fields' types (Chat Completions and Responses), reported as the API words them:
// "Invalid type for 'stream': expected a boolean, but got a string instead." Pure; never changes the body.

import { isObj, type Json } from '../core/json.js';

/** A field the API would refuse: its message and the `param` it names. */
export interface OpenAIFieldViolation {
  message: string;
  param: string;
}

/** How the API names a JSON value's type in its messages. */
function typeName(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  if (typeof v === 'number') return Number.isInteger(v) ? 'an integer' : 'a decimal';
  if (typeof v === 'object') return 'an object';
  return `a ${typeof v}`;
}

const wrongType = (param: string, expected: string, v: unknown): OpenAIFieldViolation => ({
  message: `Invalid type for '${param}': expected ${expected}, but got ${typeName(v)} instead.`,
  param,
});
const missing = (param: string): OpenAIFieldViolation => ({
  message: `Missing required parameter: '${param}'.`,
  param,
});

/** Content parts of a message: each an object with a string `type`. */
function checkParts(parts: unknown, at: string): OpenAIFieldViolation | undefined {
  if (!Array.isArray(parts)) return undefined;
  for (let k = 0; k < parts.length; k++) {
    const part = parts[k];
    if (!isObj(part)) return wrongType(`${at}[${k}]`, 'an object', part);
    if (part.type === undefined) return missing(`${at}[${k}].type`);
    if (typeof part.type !== 'string') return wrongType(`${at}[${k}].type`, 'a string', part.type);
  }
  return undefined;
}

/** The first mistyped field of a Chat Completions (`chat`) or Responses (`responses`) body. */
export function checkOpenAIFieldTypes(
  body: Json,
  kind: 'chat' | 'responses',
): OpenAIFieldViolation | undefined {
  if (body.model === undefined) return missing('model');
  if (typeof body.model !== 'string') return wrongType('model', 'a string', body.model);
  for (const f of ['stream', 'store', 'parallel_tool_calls'] as const) {
    if (body[f] !== undefined && body[f] !== null && typeof body[f] !== 'boolean')
      return wrongType(f, 'a boolean', body[f]);
  }
  if (body.metadata !== undefined && body.metadata !== null && !isObj(body.metadata))
    return wrongType('metadata', 'an object', body.metadata);
  if (kind === 'chat') {
    if (!Array.isArray(body.messages)) return undefined; // missing messages is the route's message
    for (let i = 0; i < body.messages.length; i++) {
      const m = body.messages[i];
      if (!isObj(m)) continue;
      const v = checkParts(m.content, `messages[${i}].content`);
      if (v) return v;
    }
    return undefined;
  }
  if (body.previous_response_id !== undefined && body.previous_response_id !== null) {
    if (typeof body.previous_response_id !== 'string')
      return wrongType('previous_response_id', 'a string', body.previous_response_id);
  }
  if (body.include !== undefined && body.include !== null) {
    if (!Array.isArray(body.include)) return wrongType('include', 'an array', body.include);
    const i = body.include.findIndex((x) => typeof x !== 'string');
    if (i >= 0) return wrongType(`include[${i}]`, 'a string', body.include[i]);
  }
  if (!Array.isArray(body.input)) return undefined;
  for (let i = 0; i < body.input.length; i++) {
    const item = body.input[i];
    if (!isObj(item)) continue;
    if (item.role === undefined && item.type === undefined) return missing(`input[${i}].type`);
    const v = checkParts(item.content, `input[${i}].content`);
    if (v) return v;
  }
  return undefined;
}
