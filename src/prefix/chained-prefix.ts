// A Responses request chained with `previous_response_id` made whole: the previous response's full context
// (its input and output items) followed by the new input, as one body. Pure; never edits its inputs.
//
// The chained context is part of the prompt and caches like a resent conversation, so the prefix of a
// chained request is the prefix of the body that resends everything: same blocks, same keys, same tokens.
// The previous request's own `instructions` are not carried over (the API takes the chained request's).

import type { ByteSpan, RequestBody } from '../wire/request-body.js';
import {
  foldLevel,
  messageStart,
  type Prefix,
  type PrefixBlock,
  type PrefixBuilder,
} from './build-prefix.js';
import { KeyChain } from './key-chain.js';
import { TranscriptChain } from './transcript.js';
import type { CacheMarker } from './unit-info.js';

const COMMA = Buffer.from(',');

/** The input items of a Responses body as one JSON fragment: the items joined by commas, no brackets. */
export function inputFragment(body: RequestBody): Buffer {
  const input = body.root.members.get('input');
  if (!input || (input.type === 'leaf' && input.first === 0x6e)) return Buffer.alloc(0);
  if (input.type === 'leaf' && input.first === 0x22) {
    // A string input is one user message (the same block identity as the array form).
    return Buffer.concat([
      Buffer.from('{"role":"user","content":'),
      body.bytes.subarray(input.start, input.end),
      Buffer.from('}'),
    ]);
  }
  if (input.type !== 'array') return Buffer.alloc(0);
  const first = input.items[0];
  const last = input.items[input.items.length - 1];
  return first && last ? body.bytes.subarray(first.start, last.end) : Buffer.alloc(0);
}

/** Output items (as a response carries them) as one JSON fragment. */
export function outputFragment(output: readonly unknown[]): Buffer {
  return Buffer.from(output.map((item) => JSON.stringify(item)).join(','));
}

/**
 * The whole body of a chained request: `context` (fragments of earlier input and output items, oldest
 * first), then the request's own input, as its `input`; `previous_response_id` left out; every other
 * member as sent, in order.
 */
export function chainedBody(body: RequestBody, context: readonly Uint8Array[]): Buffer {
  const items = [...context, inputFragment(body)].filter((f) => f.length > 0);
  const input = Buffer.concat([
    Buffer.from('['),
    ...items.flatMap((f, i) => (i ? [COMMA, f] : [f])),
    Buffer.from(']'),
  ]);
  const parts: Buffer[] = [Buffer.from('{')];
  let sawInput = false;
  for (const [key, node] of body.root.members) {
    if (key === 'previous_response_id') continue;
    if (parts.length > 1) parts.push(COMMA);
    parts.push(Buffer.from(`${JSON.stringify(key)}:`));
    if (key === 'input') {
      sawInput = true;
      parts.push(input);
    } else parts.push(Buffer.from(body.bytes.subarray(node.start, node.end)));
  }
  if (!sawInput) parts.push(Buffer.from(`${parts.length > 1 ? ',' : ''}"input":`), input);
  parts.push(Buffer.from('}'));
  return Buffer.concat(parts);
}

/**
 * The full prefix of `chained`, given the previous request's *full* prefix (for a request that was itself
 * chained, the result of this function for it) and the output items of its response.
 */
export function chainPrefix(
  builder: PrefixBuilder,
  previous: Prefix,
  output: readonly unknown[],
  chained: Prefix,
): Prefix {
  const context = [inputFragment(previous.body), outputFragment(output)];
  return builder.parse(chainedBody(chained.body, context), { format: 'openai-responses' });
}

/** What {@link opaqueItem} stands for: a response's whole context, or only its output items. */
export type OpaquePart = 'context' | 'output';

/**
 * An input item that stands for what a response holds but the caller does not know (the proxy did not see
 * it, or could not read its output): its identity is derived from the response id alone, so two requests
 * that chain on the same unknown response share it, and nothing else does.
 */
export function opaqueItem(responseId: string, part: OpaquePart): Buffer {
  return Buffer.from(
    `{"type":"cacheward.previous_response","response_id":${JSON.stringify(responseId)},"part":"${part}"}`,
  );
}

/**
 * One messages-level block of a chained context as identities only (no text): enough to key it into a
 * later request exactly as the builder keys the same items resent. The proxy keeps these per response.
 */
export interface ContextBlock {
  kind: string;
  name?: string;
  role?: string;
  /** The first block of its message (or Responses item). */
  first: boolean;
  /** The identity of the message boundary (role and header) it opens; none for Responses items. */
  opens?: string;
  contentHash: string;
  tokens: number;
  /**
   * Where it sat in the body it came from (for output items, in their parse): kept so a chained request's
   * captured context equals the earlier record's blocks, and the capture stores only what is new.
   */
  span: ByteSpan;
  cacheControl?: CacheMarker;
  emptyText?: boolean;
}

/** The messages-level blocks of `prefix` (as sent) as context blocks, boundaries read from its units. */
export function contextBlocks(prefix: Prefix): ContextBlock[] {
  const opens = new Map<number, string>();
  for (const u of prefix.body.units) {
    if (u.level === 'messages' && u.messageIndex !== undefined && u.messageHeader !== undefined)
      if (!opens.has(u.messageIndex)) opens.set(u.messageIndex, messageStart(u.role ?? '', u.messageHeader));
  }
  const { start, end } = prefix.levels.messages;
  const out: ContextBlock[] = [];
  let last: number | undefined;
  for (let i = start; i < end; i++) {
    const b = prefix.blocks[i] as PrefixBlock;
    const first = b.messageIndex !== last;
    last = b.messageIndex;
    const c: ContextBlock = {
      kind: b.kind,
      first,
      contentHash: b.contentHash,
      tokens: b.tokens,
      span: b.span,
    };
    if (b.name !== undefined) c.name = b.name;
    if (b.role !== undefined) c.role = b.role;
    const open = first && b.messageIndex !== undefined ? opens.get(b.messageIndex) : undefined;
    if (open !== undefined) c.opens = open;
    if (b.cacheControl) c.cacheControl = b.cacheControl;
    if (b.emptyText) c.emptyText = true;
    out.push(c);
  }
  return out;
}

/** Items (a response's output items, or {@link opaqueItem}s) as context blocks: parsed as resent input. */
export function itemBlocks(builder: PrefixBuilder, items: readonly Uint8Array[]): ContextBlock[] {
  const parts = items.filter((f) => f.length > 0);
  if (!parts.length) return [];
  const body = Buffer.concat([
    Buffer.from('{"input":['),
    ...parts.flatMap((f, i) => (i ? [COMMA, f] : [f])),
    Buffer.from(']}'),
  ]);
  return contextBlocks(builder.parse(body, { format: 'openai-responses' }));
}

/** The context blocks standing for an unknown part of response `responseId`, sized from usage (`tokens`). */
export function opaqueBlocks(
  builder: PrefixBuilder,
  responseId: string,
  part: OpaquePart,
  tokens: number,
): ContextBlock[] {
  return itemBlocks(builder, [opaqueItem(responseId, part)]).map((b) => ({
    ...b,
    tokens: Math.max(0, Math.round(tokens)),
  }));
}

/** A chained request made whole from identities: its prefix, and all its messages-level blocks to chain on. */
export interface ChainedPrefix {
  prefix: Prefix;
  /** The context, then the request's own input: what a request chained on its response continues. */
  context: ContextBlock[];
}

/**
 * The prefix of `chained` (a Responses request with `previous_response_id`) when the response it names
 * continued `context` (see {@link contextBlocks}, {@link itemBlocks}, {@link opaqueBlocks}): keyed, counted
 * and transcribed exactly as {@link chainPrefix} would parse the same conversation resent, without any
 * text. Tools and system are the chained request's; `previous_response_id` is not folded in (it names
 * the context, which is now part of the prefix). Context blocks keep the span of the body they came from. Pure.
 */
export function chainBlocks(chained: Prefix, context: readonly ContextBlock[]): ChainedPrefix {
  const own = contextBlocks(chained);
  const all = [...context, ...own];
  const info = chained.levels.messages;
  const { previous_response_id: _dropped, ...params } = info.params;
  const before = info.start > 0 ? (chained.blocks[info.start - 1] as PrefixBlock) : undefined;
  // The key the messages level folds onto: the last system block's, or with no system blocks (a request
  // without instructions, as Codex sends) the system level's own fold, which already holds the tools.
  const system = chained.levels.system;
  const running = system.end > system.start ? (before as PrefixBlock).hash : system.foldHash;
  const foldHash = foldLevel(running, 'messages', params);
  const blocks = chained.blocks.slice(0, info.start);
  const chain = new KeyChain();
  chain.reset(foldHash);
  const transcript = new TranscriptChain();
  let tokens = before?.cumulativeTokens ?? 0;
  let message = -1;
  for (let i = 0; i < all.length; i++) {
    const c = all[i] as ContextBlock;
    const mine = i >= context.length ? chained.blocks[info.start + i - context.length] : undefined;
    if (c.first) message++;
    if (c.opens !== undefined) chain.absorb(c.opens);
    chain.absorb(c.contentHash);
    tokens += c.tokens;
    blocks.push({
      index: blocks.length,
      level: 'messages',
      kind: c.kind,
      name: c.name,
      messageIndex: message,
      partIndex: mine?.partIndex ?? 0,
      role: c.role,
      contentHash: c.contentHash,
      hash: chain.key(),
      tokens: c.tokens,
      cumulativeTokens: tokens,
      span: mine?.span ?? c.span,
      cacheControl: c.cacheControl,
      emptyText: c.emptyText,
      toolParts: undefined,
      transcript: transcript.next(c.role, c.contentHash),
    });
  }
  const levels = {
    ...chained.levels,
    messages: { start: info.start, end: blocks.length, params, foldHash },
  };
  return { prefix: { ...chained, blocks, levels, totalTokens: tokens }, context: all };
}
