// forkRequest: a background request (review, summary) built from the parent's exact request, so it reads the
// parent's cache: everything that shapes the prefix kept, the parent's reply and the instruction appended.

import { CachewardError } from '../core/errors.js';
import { parsePrefix } from '../prefix/build-prefix.js';
import { comparePrefixes, type Divergence } from '../prefix/first-divergence.js';
import { stableJson } from '../prefix/stable-json.js';
import type { WireFormat } from '../wire/request-body.js';

type Json = Record<string, unknown>;
const isObj = (v: unknown): v is Json => v !== null && typeof v === 'object' && !Array.isArray(v);

/** The parent as it was sent. */
export interface ForkParent {
  format: WireFormat;
  /** The parent's request body, exactly as sent. */
  body: Json;
  /** The parent's request headers that matter (`anthropic-beta`). */
  headers?: Readonly<Record<string, string>>;
  /**
   * The parent's reply, appended before the instruction: Anthropic content blocks, an OpenAI Chat
   * assistant message, or Responses output items.
   */
  reply?: unknown;
}

export interface ForkOptions {
  /** Throw a ForkParityError instead of returning a fork whose prefix diverges from the parent's. */
  requireParity?: boolean;
  /** Ask for a streamed reply (default: as the parent). */
  stream?: boolean;
  /** Limit the fork's output (default: as the parent). */
  maxTokens?: number;
}

export interface ForkedRequest {
  body: Json;
  /** Headers that must match the parent's for the cache to hold (the anthropic-beta set). */
  headers: Record<string, string>;
  /** Index in the fork's messages (or input items) where its own part begins. */
  appendedAt: number;
}

/** A fork that would not read the parent's cache. */
export class ForkParityError extends CachewardError {
  constructor(readonly parity: ForkParity) {
    super(
      'CW_FORK_PARITY',
      `the fork would not share the parent's cached prefix: ${parity.problems.join('; ')}`,
    );
  }
}

const LOOKBACK = 20;

/** Builds the fork request. The parent's bytes are never changed: its messages are a prefix of the fork's. */
export function forkRequest(
  parent: ForkParent,
  instruction: string,
  options: ForkOptions = {},
): ForkedRequest {
  const body = structuredClone(parent.body) as Json;
  if (options.stream !== undefined) body.stream = options.stream;
  let appendedAt: number;
  if (parent.format === 'anthropic-messages') {
    const messages = [...((body.messages as Json[]) ?? [])];
    appendedAt = messages.length;
    const reply = parent.reply;
    let replyBlocks = 0;
    if (reply !== undefined) {
      const content = Array.isArray(reply)
        ? reply
        : typeof reply === 'string'
          ? [{ type: 'text', text: reply }]
          : [reply];
      messages.push({ role: 'assistant', content });
      replyBlocks = content.length;
    }
    // A new user message: the provider merges it with an adjacent user turn; the parent's stays untouched.
    messages.push({ role: 'user', content: [{ type: 'text', text: instruction }] });
    body.messages = messages;
    if (options.maxTokens !== undefined) body.max_tokens = options.maxTokens;
    placeBreakpoint(body, replyBlocks + 1, reply !== undefined ? 2 : 1);
  } else if (parent.format === 'openai-chat') {
    const messages = [...((body.messages as Json[]) ?? [])];
    appendedAt = messages.length;
    if (parent.reply !== undefined) {
      messages.push(
        isObj(parent.reply)
          ? { role: 'assistant', ...parent.reply }
          : { role: 'assistant', content: String(parent.reply) },
      );
    }
    messages.push({ role: 'user', content: instruction });
    body.messages = messages;
    if (options.maxTokens !== undefined) body.max_completion_tokens = options.maxTokens;
  } else {
    const input =
      typeof body.input === 'string'
        ? [{ role: 'user', content: body.input }]
        : [...((body.input as Json[]) ?? [])];
    appendedAt = input.length;
    if (parent.reply !== undefined)
      input.push(...(Array.isArray(parent.reply) ? (parent.reply as Json[]) : [parent.reply as Json]));
    input.push({ role: 'user', content: instruction });
    body.input = input;
    if (options.maxTokens !== undefined) body.max_output_tokens = options.maxTokens;
  }
  const headers: Record<string, string> = {};
  const beta = parent.headers?.['anthropic-beta'];
  if (beta) headers['anthropic-beta'] = beta;
  const fork = { body, headers, appendedAt };
  if (options.requireParity) {
    const parity = verifyForkParity(parent, fork);
    if (!parity.ok) throw new ForkParityError(parity);
  }
  return fork;
}

/**
 * The fork's breakpoints: the parent's markers stay (they are its bytes) and are read where they stand. If
 * the parent relied on automatic caching and the fork's own part is longer than the lookback, a marker goes
 * on the parent's last block so the fork still reads it (a marker is not part of a block's identity).
 */
function placeBreakpoint(body: Json, appendedBlocks: number, appendedMessages: number): void {
  const auto = isObj(body.cache_control) ? (body.cache_control as Json) : undefined;
  if (!auto || appendedBlocks < LOOKBACK || countMarkers(body) >= 3) return;
  const messages = body.messages as Json[];
  const content = messages[messages.length - 1 - appendedMessages]?.content;
  if (Array.isArray(content) && isObj(content[content.length - 1])) {
    (content[content.length - 1] as Json).cache_control = { ...auto };
  }
}

function countMarkers(body: Json): number {
  let n = 0;
  const visit = (blocks: unknown) => {
    if (Array.isArray(blocks)) for (const b of blocks) if (isObj(b) && b.cache_control !== undefined) n++;
  };
  visit(body.tools);
  visit(body.system);
  for (const m of (body.messages as Json[]) ?? []) if (isObj(m)) visit(m.content);
  return n;
}

/** What differs between a parent and its fork, before the fork's own part. */
export interface ForkParity {
  ok: boolean;
  /** The first divergence of the cached prefix, if it comes before the fork's appended part. */
  divergence: Divergence | null;
  /** Non-message fields that differ (each one can change the cached prefix or the routing). */
  fields: string[];
  problems: string[];
}

const MESSAGE_FIELDS = new Set([
  'messages',
  'input',
  'stream',
  'max_tokens',
  'max_completion_tokens',
  'max_output_tokens',
  'stream_options',
]);

/** Checks a fork against its parent: the parent's messages must be a prefix of the fork's, fields equal. */
export function verifyForkParity(
  parent: ForkParent,
  fork: Pick<ForkedRequest, 'body' | 'headers'>,
): ForkParity {
  const fields: string[] = [];
  const keys = new Set([...Object.keys(parent.body), ...Object.keys(fork.body)]);
  for (const k of keys) {
    if (MESSAGE_FIELDS.has(k)) continue;
    if (k === 'cache_control') continue;
    if (stableJson(parent.body[k]) !== stableJson(fork.body[k])) fields.push(k);
  }
  const pb = parent.headers?.['anthropic-beta'] ?? '';
  const fb = fork.headers['anthropic-beta'] ?? '';
  if (pb !== fb) fields.push('anthropic-beta');
  const headers = (h: string) => (h ? { 'anthropic-beta': h } : undefined);
  const a = parsePrefix(JSON.stringify(parent.body), {
    format: parent.format,
    ...(headers(pb) ? { headers: headers(pb) } : {}),
  });
  const b = parsePrefix(JSON.stringify(fork.body), {
    format: parent.format,
    ...(headers(fb) ? { headers: headers(fb) } : {}),
  });
  const cmp = comparePrefixes(a, b);
  // Appending messages never diverges; any divergence sits inside the parent's part.
  const divergence = cmp.divergence;
  const problems = [
    ...fields.map((f) => `${f} differs from the parent's`),
    ...(divergence ? [`the prefix diverges at block ${divergence.blockIndex} (${divergence.level})`] : []),
  ];
  return { ok: problems.length === 0, divergence, fields, problems };
}
