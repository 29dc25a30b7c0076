// The Anthropic request fields' types, checked as the API's validator reports them (`path: message`), before
// any caching rule runs. Pure: a parsed body in, the first violation out; it never changes the body.

import { isObj, type Json } from '../core/json.js';
import { invalidRequest as bad, type RuleViolation } from './rule-violation.js';

/** A `cache_control` value: an object whose `type` is `ephemeral` (the TTL is checked with the breakpoints). */
function checkMarker(value: unknown, at: string): RuleViolation | undefined {
  if (value === undefined || value === null) return undefined;
  if (!isObj(value)) return bad(`${at}: Input should be a valid dictionary`);
  if (value.type === undefined) return bad(`${at}.type: Field required`);
  if (value.type !== 'ephemeral') return bad(`${at}.type: Input should be 'ephemeral'`);
  return undefined;
}

/** A content block: an object with a string `type`, and a well-formed marker. */
function checkBlock(block: unknown, at: string): RuleViolation | undefined {
  if (!isObj(block)) return bad(`${at}: Input should be a valid dictionary`);
  if (block.type === undefined) return bad(`${at}.type: Field required`);
  if (typeof block.type !== 'string') return bad(`${at}.type: Input should be a valid string`);
  const marker = checkMarker(block.cache_control, `${at}.cache_control`);
  if (marker) return marker;
  // A tool_result's own content blocks are blocks too.
  if (block.type === 'tool_result' && Array.isArray(block.content)) {
    for (let k = 0; k < block.content.length; k++) {
      const v = checkBlock(block.content[k], `${at}.content.${k}`);
      if (v) return v;
    }
  }
  return undefined;
}

const NUMBER_FIELDS = ['temperature', 'top_p'] as const;
const OBJECT_FIELDS = ['metadata', 'tool_choice', 'thinking', 'output_config', 'context_management'] as const;

/**
 * The first field whose type is wrong, worded as the API words it: `model: Field required`, `model: Input
 * should be a valid string`, `stream: Input should be a valid boolean`, `messages.0.content.0.type: Field
 * required`, `….cache_control: Input should be a valid dictionary`. `max_tokens` is the rules' concern.
 */
export function checkAnthropicFieldTypes(body: Json): RuleViolation | undefined {
  if (body.model === undefined || body.model === null) return bad('model: Field required');
  if (typeof body.model !== 'string') return bad('model: Input should be a valid string');
  if (body.stream !== undefined && typeof body.stream !== 'boolean')
    return bad('stream: Input should be a valid boolean');
  for (const f of NUMBER_FIELDS) {
    const v = body[f];
    if (v !== undefined && (typeof v !== 'number' || !Number.isFinite(v)))
      return bad(`${f}: Input should be a valid number`);
  }
  if (body.top_k !== undefined && !Number.isInteger(body.top_k))
    return bad('top_k: Input should be a valid integer');
  for (const f of OBJECT_FIELDS) {
    if (body[f] !== undefined && !isObj(body[f])) return bad(`${f}: Input should be a valid dictionary`);
  }
  if (isObj(body.tool_choice) && typeof body.tool_choice.type !== 'string')
    return bad('tool_choice.type: Field required');
  if (isObj(body.thinking) && typeof body.thinking.type !== 'string')
    return bad('thinking.type: Field required');
  if (body.stop_sequences !== undefined) {
    if (!Array.isArray(body.stop_sequences)) return bad('stop_sequences: Input should be a valid list');
    const i = body.stop_sequences.findIndex((s) => typeof s !== 'string');
    if (i >= 0) return bad(`stop_sequences.${i}: Input should be a valid string`);
  }
  const top = checkMarker(body.cache_control, 'cache_control');
  if (top) return top;
  if (Array.isArray(body.system)) {
    for (let i = 0; i < body.system.length; i++) {
      const block = body.system[i];
      const at = `system.${i}`;
      if (!isObj(block)) return bad(`${at}: Input should be a valid dictionary`);
      if (block.type === undefined) return bad(`${at}.type: Field required`);
      if (block.type !== 'text') return bad(`${at}.type: Input should be 'text'`);
      if (typeof block.text !== 'string') return bad(`${at}.text: Input should be a valid string`);
      const v = checkMarker(block.cache_control, `${at}.cache_control`);
      if (v) return v;
    }
  } else if (body.system !== undefined && typeof body.system !== 'string') {
    return bad('system: Input should be a valid string or a list of text blocks');
  }
  if (Array.isArray(body.tools)) {
    for (let i = 0; i < body.tools.length; i++) {
      const tool = body.tools[i];
      if (!isObj(tool)) return bad(`tools.${i}: Input should be a valid dictionary`);
      const v = checkMarker(tool.cache_control, `tools.${i}.cache_control`);
      if (v) return v;
    }
  } else if (body.tools !== undefined) return bad('tools: Input should be a valid list');
  if (body.messages !== undefined && !Array.isArray(body.messages))
    return bad('messages: Input should be a valid list');
  const messages = Array.isArray(body.messages) ? body.messages : [];
  for (let m = 0; m < messages.length; m++) {
    const msg = messages[m];
    if (!isObj(msg) || !Array.isArray(msg.content)) continue; // roles and content forms are the rules' concern
    for (let k = 0; k < msg.content.length; k++) {
      const v = checkBlock(msg.content[k], `messages.${m}.content.${k}`);
      if (v) return v;
    }
  }
  return undefined;
}
