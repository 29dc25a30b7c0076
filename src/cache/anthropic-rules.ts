// The Anthropic request rules that end in a 400 (SPEC-caching.md): required fields, breakpoints, TTL order,
// mid-conversation system messages, tool changes, tool_use/tool_result pairing. Pure: a body in, a verdict out.

import { isObj, type Json } from '../core/json.js';
import type { Prefix } from '../prefix/build-prefix.js';
import { checkAnthropicFieldTypes } from './anthropic-field-types.js';
import { anthropicModelFacts } from './anthropic-models.js';
import { checkMaxTokens } from './anthropic-prewarm.js';
import { checkToolSearch } from './anthropic-tool-search.js';
import { invalidRequest as bad, type RuleViolation } from './rule-violation.js';

export type { RuleViolation } from './rule-violation.js';

export const MID_CONVERSATION_TOOL_CHANGES_BETA = 'mid-conversation-tool-changes-2026-07-01';
const MAX_BREAKPOINTS = 4;

/** A breakpoint as the cache model sees it: the block it marks and its TTL in ms. */
export interface Breakpoint {
  blockIndex: number;
  ttlMs: number;
  automatic: boolean;
}

export const TTL_5M = 5 * 60_000;
export const TTL_1H = 60 * 60_000;

function ttlOf(marker: { ttl?: string } | undefined): number | undefined {
  if (!marker) return undefined;
  if (marker.ttl === undefined || marker.ttl === '5m') return TTL_5M;
  if (marker.ttl === '1h') return TTL_1H;
  return undefined;
}

/** Block kinds that can never carry a marker; the automatic breakpoint walks back over them. */
const UNMARKABLE = new Set(['thinking', 'redacted_thinking']);

/**
 * The request's breakpoints (explicit markers, plus the automatic one from a top-level `cache_control`),
 * or the violation that makes it a 400. Works from the prefix alone, so the analyzer can run it on captures.
 */
export function anthropicBreakpoints(prefix: Prefix): Breakpoint[] | RuleViolation {
  const out: Breakpoint[] = [];
  for (const b of prefix.blocks) {
    if (!b.cacheControl) continue;
    if (UNMARKABLE.has(b.kind))
      return bad(`${where(prefix, b.index)}: cache_control cannot be set on ${b.kind} blocks`);
    if (b.emptyText)
      return bad(`${where(prefix, b.index)}: cache_control cannot be set on an empty text block`);
    const ttl = ttlOf(b.cacheControl);
    if (ttl === undefined) return bad(`${where(prefix, b.index)}.cache_control.ttl: must be "5m" or "1h"`);
    out.push({ blockIndex: b.index, ttlMs: ttl, automatic: false });
  }
  if (prefix.autoCacheControl) {
    const ttl = ttlOf(prefix.autoCacheControl);
    if (ttl === undefined) return bad('cache_control.ttl: must be "5m" or "1h"');
    let i = prefix.blocks.length - 1;
    while (i >= 0) {
      const b = prefix.blocks[i];
      if (b && !UNMARKABLE.has(b.kind) && !b.emptyText && b.kind !== 'empty') break;
      i--;
    }
    if (i >= 0) {
      const last = out[out.length - 1];
      if (last && last.blockIndex === i) {
        if (last.ttlMs !== ttl) {
          return bad(
            'cache_control: the last cacheable block already has cache_control with a different ttl than the top-level cache_control',
          );
        }
      } else {
        if (out.length >= MAX_BREAKPOINTS) {
          return bad(
            `A maximum of ${MAX_BREAKPOINTS} blocks with cache_control may be provided. Found ${out.length + 1}. (automatic caching adds one)`,
          );
        }
        out.push({ blockIndex: i, ttlMs: ttl, automatic: true });
      }
    }
  }
  if (out.length > MAX_BREAKPOINTS) {
    return bad(
      `A maximum of ${MAX_BREAKPOINTS} blocks with cache_control may be provided. Found ${out.length}.`,
    );
  }
  for (let i = 1; i < out.length; i++) {
    const prev = out[i - 1] as Breakpoint;
    const cur = out[i] as Breakpoint;
    if (cur.ttlMs > prev.ttlMs) {
      return bad(
        `${where(prefix, cur.blockIndex)}.cache_control: a ttl of "1h" cannot come after a ttl of "5m"; longer-lived breakpoints must come first`,
      );
    }
  }
  return out;
}

/** Options for {@link checkAnthropicRequest}. */
export interface AnthropicCheckOptions {
  /** `count_tokens` needs no `max_tokens`. */
  countTokens?: boolean;
}

/**
 * Every other 400 rule, on the parsed body: required fields, roles, mid-conversation system messages,
 * tool changes, tool_use/tool_result pairing, deferred tools with markers. Returns the first violation.
 */
export function checkAnthropicRequest(
  body: Json,
  prefix: Prefix,
  options: AnthropicCheckOptions = {},
): RuleViolation | undefined {
  const typed = checkAnthropicFieldTypes(body);
  if (typed) return typed;
  if (typeof body.model !== 'string' || body.model === '') return bad('model: Field required');
  const maxTokens = checkMaxTokens(body, options.countTokens ?? false);
  if (maxTokens) return maxTokens;
  const messages = body.messages;
  if (!Array.isArray(messages)) return bad('messages: Field required');
  if (messages.length === 0) return bad('messages: at least one message is required');
  const facts = anthropicModelFacts(body.model);
  const tools = Array.isArray(body.tools) ? body.tools.filter(isObj) : [];
  const declared = new Set(tools.map((t) => t.name).filter((n): n is string => typeof n === 'string'));
  for (const [i, t] of tools.entries()) {
    if (t.defer_loading === true && t.cache_control !== undefined) {
      return bad(`tools.${i}: cache_control cannot be set on a tool with defer_loading: true`);
    }
  }
  const betas = new Set(prefix.body.betas);
  for (let m = 0; m < messages.length; m++) {
    const msg = messages[m];
    if (!isObj(msg)) return bad(`messages.${m}: must be an object`);
    const role = msg.role;
    if (role !== 'user' && role !== 'assistant' && role !== 'system') {
      return bad(`messages.${m}.role: Input should be 'user', 'assistant' or 'system'`);
    }
    const content = msg.content;
    if (typeof content !== 'string' && !Array.isArray(content)) {
      return bad(`messages.${m}.content: must be a string or an array of content blocks`);
    }
    if (role === 'system') {
      const v = checkSystemMessage(messages, m, facts.midConversationSystem, body.model);
      if (v) return v;
      if (Array.isArray(content)) {
        for (const [k, block] of content.entries()) {
          if (!isObj(block) || (block.type !== 'tool_addition' && block.type !== 'tool_removal')) continue;
          if (!betas.has(MID_CONVERSATION_TOOL_CHANGES_BETA)) {
            return bad(
              `messages.${m}.content.${k}: ${block.type} blocks require the anthropic-beta header "${MID_CONVERSATION_TOOL_CHANGES_BETA}"`,
            );
          }
          const name = isObj(block.tool) ? block.tool.name : undefined;
          if (typeof name !== 'string' || !declared.has(name)) {
            return bad(
              `messages.${m}.content.${k}.tool.name: tool ${JSON.stringify(name)} is not declared in tools; declare it (with defer_loading: true) first`,
            );
          }
        }
      }
    }
  }
  const search = checkToolSearch(body);
  if (search) return search;
  return checkToolPairing(messages as Json[]);
}

/**
 * Placement of a mid-conversation system message (mid-conversation-system-messages.md, "Limitations"): "A
 * `system` message must immediately follow a `user` turn (including a `user` turn that carries
 * `tool_result` blocks) or an `assistant` turn ending in a server tool result, and must precede an
 * `assistant` turn or end the array." "Consecutive system messages are accepted and treated as a single
 * system section, which follows the same placement rule as a whole." Checked once per section.
 */
function checkSystemMessage(
  messages: unknown[],
  m: number,
  supported: boolean,
  model: string,
): RuleViolation | undefined {
  if (!supported) {
    return bad(
      `messages.${m}.role: system messages inside messages are not supported on ${model}; use the top-level system field`,
    );
  }
  const isSystem = (i: number) => isObj(messages[i]) && (messages[i] as Json).role === 'system';
  if (m > 0 && isSystem(m - 1)) return undefined; // the section was checked at its first message
  if (m === 0) return bad(`messages.${m}: a system message cannot be the first message`);
  let end = m;
  while (isSystem(end + 1)) end++;
  const before = messages[m - 1] as Json;
  if (before.role !== 'user' && !(before.role === 'assistant' && endsInServerToolResult(before))) {
    return bad(
      `messages.${m}: a system message must follow a user turn (tool results count as one) or an assistant turn ending in a server tool result`,
    );
  }
  const after = messages[end + 1] as Json | undefined;
  if (after && after.role !== 'assistant') {
    return bad(`messages.${end}: a system message must be followed by an assistant turn or end the messages`);
  }
  return undefined;
}

/** An assistant turn whose last block is a server tool's result (`web_search_tool_result`, …). */
function endsInServerToolResult(msg: Json): boolean {
  const last = Array.isArray(msg.content) ? msg.content[msg.content.length - 1] : undefined;
  const type = isObj(last) ? last.type : undefined;
  return typeof type === 'string' && type.endsWith('_tool_result') && type !== 'tool_result';
}

const blocksOf = (msg: Json): Json[] =>
  Array.isArray(msg.content) ? (msg.content.filter(isObj) as Json[]) : [];

/** Each tool_result answers a tool_use of the assistant turn just before; each tool_use is answered next. */
function checkToolPairing(messages: Json[]): RuleViolation | undefined {
  for (let m = 0; m < messages.length; m++) {
    const msg = messages[m] as Json;
    const results = blocksOf(msg).filter((b) => b.type === 'tool_result');
    if (msg.role === 'user' && results.length) {
      const prev = messages[m - 1];
      const ids = new Set(
        prev && prev.role === 'assistant'
          ? blocksOf(prev)
              .filter((b) => b.type === 'tool_use' || b.type === 'server_tool_use')
              .map((b) => b.id)
          : [],
      );
      for (const r of results) {
        if (!ids.has(r.tool_use_id)) {
          return bad(
            `messages.${m}.content: unexpected \`tool_use_id\` found in \`tool_result\` blocks: ${String(r.tool_use_id)}. Each \`tool_result\` block must have a corresponding \`tool_use\` block in the previous message.`,
          );
        }
      }
    }
    if (msg.role === 'assistant' && m + 1 < messages.length) {
      const uses = blocksOf(msg).filter((b) => b.type === 'tool_use');
      if (!uses.length) continue;
      const next = messages[m + 1] as Json;
      const answered = new Set(
        next.role === 'user'
          ? blocksOf(next)
              .filter((b) => b.type === 'tool_result')
              .map((b) => b.tool_use_id)
          : [],
      );
      const missing = uses.map((u) => u.id).filter((id) => !answered.has(id));
      if (missing.length) {
        return bad(
          `messages.${m + 1}: \`tool_use\` ids were found without \`tool_result\` blocks immediately after: ${missing.join(', ')}. Each \`tool_use\` block must have a corresponding \`tool_result\` block in the next message.`,
        );
      }
    }
  }
  return undefined;
}

function where(prefix: Prefix, index: number): string {
  const b = prefix.blocks[index];
  if (!b) return `blocks.${index}`;
  if (b.level === 'tools') return `tools.${index - prefix.levels.tools.start}`;
  if (b.level === 'system') return `system.${b.partIndex ?? 0}`;
  return `messages.${b.messageIndex ?? 0}.content.${b.partIndex ?? 0}`;
}
