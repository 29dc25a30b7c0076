// forkRequest: a background request (review, summary) built from the parent's exact request, so it reads the
// parent's cache: everything that shapes the prefix kept, the parent's reply and the instruction appended.
// Pure: it never sends the request, and never changes a byte of the parent's prefix.

import { CachewardError } from '../core/errors.js';
import { isObj, type Json } from '../core/json.js';
import { parsePrefix } from '../prefix/build-prefix.js';
import { chainedBody, inputFragment, opaqueItem, outputFragment } from '../prefix/chained-prefix.js';
import { comparePrefixes, type Divergence } from '../prefix/first-divergence.js';
import { stableJson } from '../prefix/stable-json.js';
import { parseRequestBody, type WireFormat } from '../wire/request-body.js';

/**
 * The parent as it was sent. `B` is the body's own type (the SDK's params type, say), so the fork's body
 * comes back typed the same and goes to the same SDK call without a cast.
 */
export interface ForkParent<B extends object = Json> {
  /**
   * The format; when absent it is decided as the parser decides it: from `route`, then from the body.
   */
  format?: WireFormat;
  /** The route the parent went to (e.g. `/v1/messages`), used to decide the format when it is not given. */
  route?: string;
  /** The parent's request body, exactly as sent: the object, or the bytes that went out. */
  body: B | Uint8Array | string;
  /** The parent's request headers that matter (`anthropic-beta`). */
  headers?: Readonly<Record<string, string>>;
  /**
   * The parent's reply, appended before the instruction: Anthropic content blocks, an OpenAI Chat
   * assistant message, or Responses output items.
   */
  reply?: unknown;
  /**
   * Responses: the id of the parent's response. A fork that sends it as `previous_response_id` continues
   * the parent on the provider's side (its input and output are the fork's context); see `chain`.
   */
  responseId?: string;
}

export interface ForkOptions {
  /** Throw a ForkParityError instead of returning a fork whose prefix diverges from the parent's. */
  requireParity?: boolean;
  /** Ask for a streamed reply (default: as the parent). */
  stream?: boolean;
  /** Limit the fork's output (default: as the parent). */
  maxTokens?: number;
  /**
   * Responses: chain the fork on the parent's response (`previous_response_id` = `parent.responseId`) and
   * send only the instruction as input; the provider holds the rest. Needs `parent.responseId`.
   */
  chain?: boolean;
}

export interface ForkedRequest<B extends object = Json> {
  /** The format the fork was built for (given, or decided from the route or the body). */
  format: WireFormat;
  body: B;
  /** The exact bytes to send (parity was checked on these). */
  bytes: Buffer;
  /** Headers that must match the parent's for the cache to hold (the anthropic-beta set). */
  headers: Record<string, string>;
  /** Index in the fork's messages (or input items) where its own part begins (0 for a chained fork). */
  appendedAt: number;
  /** Whether the fork reads the parent's cache, always checked. */
  parity: ForkParity;
}

/** A fork that would not read the parent's cache. */
export class ForkParityError extends CachewardError {
  constructor(readonly parity: ForkParity & { ok: false }) {
    super('CW_FORK_PARITY', `the fork would not share the parent's cached prefix: ${parity.reason}`);
  }
}

/** The parent's response id when `fork` is chained on it (Responses, `previous_response_id` equal to it). */
function isChainedFork(format: WireFormat, responseId: string | undefined, fork: Json): string | undefined {
  return format === 'openai-responses' && responseId && fork.previous_response_id === responseId
    ? responseId
    : undefined;
}

/** The parent's bytes and parsed body, and its format decided as the parser decides it. */
function readParent(parent: ForkParent<object>): { format: WireFormat; bytes: Buffer; value: Json } {
  const given = parent.body;
  const bytes =
    typeof given === 'string'
      ? Buffer.from(given)
      : given instanceof Uint8Array
        ? Buffer.from(given.buffer, given.byteOffset, given.byteLength)
        : Buffer.from(JSON.stringify(given));
  const parsed = parseRequestBody(bytes, {
    ...(parent.format ? { format: parent.format } : {}),
    ...(parent.route ? { route: parent.route } : {}),
  });
  const value = typeof given === 'string' || given instanceof Uint8Array ? parsed.value() : (given as Json);
  return { format: parsed.format, bytes, value };
}

const LOOKBACK = 20;

/**
 * Builds the fork request. The parent's bytes are never changed: its messages are a prefix of the fork's.
 * Parity is checked on the bytes that will be sent and returned with the fork; `requireParity` throws.
 */
export function forkRequest<B extends object = Json>(
  parent: ForkParent<B>,
  instruction: string,
  options: ForkOptions = {},
): ForkedRequest<B> {
  const { format, bytes: parentBytes, value } = readParent(parent);
  const body = structuredClone(value) as Json;
  if (options.stream !== undefined) body.stream = options.stream;
  let appendedAt: number;
  if (options.chain && format !== 'openai-responses')
    throw new CachewardError(
      'CW_FORK_CHAIN',
      `a chained fork is a Responses request; this parent is ${format}`,
    );
  if (format === 'anthropic-messages') {
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
  } else if (format === 'openai-chat') {
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
  } else if (options.chain) {
    if (!parent.responseId)
      throw new CachewardError(
        'CW_FORK_CHAIN',
        "a chained fork needs the parent's response id: pass parent.responseId (the id of the response to the parent request)",
      );
    body.previous_response_id = parent.responseId;
    body.input = [{ role: 'user', content: instruction }];
    appendedAt = 0;
    if (options.maxTokens !== undefined) body.max_output_tokens = options.maxTokens;
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
  const bytes = Buffer.from(JSON.stringify(body));
  const parity = verifyForkParity({ ...parent, format, body: parentBytes }, { body: bytes, headers });
  if (options.requireParity && !parity.ok) throw new ForkParityError(parity);
  return { format, body: body as B, bytes, headers, appendedAt, parity };
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

/** What differs between a parent and its fork, before the fork's own part (the one decision shape). */
export type ForkParity = (
  | { ok: true; divergence: null }
  | {
      ok: false;
      reason: string;
      /** The first divergence of the cached prefix, if it comes before the fork's appended part. */
      divergence: Divergence | null;
    }
) & {
  /** Non-message fields that differ (each one can change the cached prefix or the routing). */
  fields: string[];
  problems: string[];
};

const MESSAGE_FIELDS = new Set([
  'messages',
  'input',
  'stream',
  'max_tokens',
  'max_completion_tokens',
  'max_output_tokens',
  'stream_options',
]);

/**
 * Checks a fork against its parent on the bytes each sends (objects are serialized as the SDKs do): the
 * parent's messages must be a prefix of the fork's, and every other field equal. A Responses fork chained
 * on the parent's response (`previous_response_id` = `parent.responseId`) is compared as the chain the
 * provider caches: the parent's input and reply are the start of the fork's input.
 */
export function verifyForkParity<B extends object>(
  parent: ForkParent<B>,
  fork: { body: object | Uint8Array | string; headers: Readonly<Record<string, string>> },
): ForkParity {
  const p = readParent(parent);
  const f = readParent({ format: p.format, body: fork.body });
  const chained = isChainedFork(p.format, parent.responseId, f.value);
  if (chained) {
    // Compared as the provider sees both: the parent's earlier context (opaque, the same for both), then
    // for the fork the parent's input, the parent's reply, and its own input.
    const prior = typeof p.value.previous_response_id === 'string' ? p.value.previous_response_id : undefined;
    const context = prior ? [opaqueItem(prior, 'context')] : [];
    const parsed = (bytes: Buffer) => parseRequestBody(bytes, { format: p.format });
    const reply =
      parent.reply !== undefined
        ? outputFragment(Array.isArray(parent.reply) ? parent.reply : [parent.reply])
        : opaqueItem(chained, 'output');
    f.bytes = chainedBody(parsed(f.bytes), [...context, inputFragment(parsed(p.bytes)), reply]);
    if (prior) p.bytes = chainedBody(parsed(p.bytes), context);
  }
  const fields: string[] = [];
  const keys = new Set([...Object.keys(p.value), ...Object.keys(f.value)]);
  for (const k of keys) {
    if (MESSAGE_FIELDS.has(k)) continue;
    if (chained && k === 'previous_response_id') continue;
    if (k === 'cache_control') continue;
    if (stableJson(p.value[k]) !== stableJson(f.value[k])) fields.push(k);
  }
  const pb = parent.headers?.['anthropic-beta'] ?? '';
  const fb = fork.headers['anthropic-beta'] ?? '';
  if (pb !== fb) fields.push('anthropic-beta');
  const headers = (h: string) => (h ? { 'anthropic-beta': h } : undefined);
  const a = parsePrefix(p.bytes, { format: p.format, ...(headers(pb) ? { headers: headers(pb) } : {}) });
  const b = parsePrefix(f.bytes, { format: p.format, ...(headers(fb) ? { headers: headers(fb) } : {}) });
  // Appending messages never diverges; any divergence sits inside the parent's part.
  const divergence = comparePrefixes(a, b).divergence;
  const problems = [
    ...fields.map((x) => `${x} differs from the parent's`),
    ...(divergence ? [`the prefix diverges at block ${divergence.blockIndex} (${divergence.level})`] : []),
  ];
  if (!problems.length) return { ok: true, divergence: null, fields, problems };
  return { ok: false, reason: problems.join('; '), divergence, fields, problems };
}
