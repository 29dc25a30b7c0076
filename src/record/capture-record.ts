// The capture record: one JSON line per exchange, and how a request's prefix is written into it.
// In `hashes` mode it holds no prompt text: identities, sizes, token estimates and small parameters only.

import { hash } from 'node:crypto';
import type { CapturedConversation } from '../conversation/conversation-tracker.js';
import { drainSteps, STEP_ITEMS } from '../core/steps.js';
import type { FixNote } from '../fixes/fix-note.js';
import type { Prefix, PrefixBlock } from '../prefix/build-prefix.js';
import { stableJson } from '../prefix/stable-json.js';
import type { NormalizedUsage } from '../wire/usage.js';

export type CaptureMode = 'off' | 'hashes' | 'full';

/** One block of a captured prefix. */
export interface CapturedBlock {
  level: 'tools' | 'system' | 'messages';
  index: number;
  kind: string;
  name?: string;
  message?: number;
  part?: number;
  role?: string;
  /** Cumulative cache key, and block identity (the first 128 bits of its sha256). */
  hash: string;
  id: string;
  /** Bytes in the body, and estimated tokens. */
  size: number;
  tokens: number;
  /** The block's byte offset in the body. */
  at: number;
  cc?: { type: string; ttl?: string };
  empty?: true;
  /** Tool definitions: identities of schema, description and other fields (prefix/unit-info ToolParts). */
  tp?: [string, string, string];
}

/**
 * A part of a request its source did not record (an agent transcript that keeps messages and usage only):
 * `tools` and `system` (their content), `params` (the parameters folded into the prefix, model aside), and
 * `injected` (content the client adds to the messages, such as reminders, that the source leaves out).
 */
export type UnrecordedPart = 'tools' | 'system' | 'params' | 'injected';

/**
 * The kind of the block that stands for the unrecorded parts: one opaque block, first in the prefix, whose
 * identity names only what it stands for and whose tokens are sized from the provider's usage.
 */
export const UNRECORDED_KIND = 'cacheward.unrecorded';

export interface CapturedPrefix {
  format: string;
  totalTokens: number;
  /**
   * On disk, the first `shared` blocks are the same as those of record `id` (the session's previous
   * record in the same file) and `blocks` holds the rest. The reader puts them back: readers see all blocks.
   */
  base?: {
    id: string;
    shared: number;
    /**
     * Runs `[first, count, delta]` of shared blocks that moved in the body: the same blocks, at their base's
     * `at` + `delta` (Claude Code sends its tools and system prompt after the messages, so every turn moves
     * them by the bytes it added). Absent when none moved.
     */
    moved?: Array<[number, number, number]>;
  };
  blocks: CapturedBlock[];
  /** Parameters folded per level; object values longer than 200 characters are kept as a hash. */
  params: Record<'tools' | 'system' | 'messages', Record<string, unknown>>;
  /** Names of tools with defer_loading: true (absent when none). */
  deferredTools?: string[];
  auto?: { type: string; ttl?: string };
  /** Each level's fold hash (the prefix model's, so a parameter change is found exactly as in `diff`). */
  folds?: { tools: string; system: string; messages: string };
  /**
   * What the request's source did not record (absent when it recorded the whole request): these parts stand
   * as the leading {@link UNRECORDED_KIND} block, and a change inside them cannot be told from another.
   */
  unrecorded?: UnrecordedPart[];
}

export type { CapturedConversation } from '../conversation/conversation-tracker.js';
export type { FixNote } from '../fixes/fix-note.js';

/** A stored body: whole (`base` absent) or the middle bytes between a shared prefix and suffix of `base`. */
export interface StoredBody {
  /** The record id of the previous body of the session, when this is a delta. */
  base?: string;
  /** Bytes shared with the base at the start and at the end. */
  prefix?: number;
  suffix?: number;
  /** The stored bytes: UTF-8 text, or base64 when they are not valid UTF-8. */
  text?: string;
  b64?: string;
  /** Length and sha256 (base64) of the whole body, checked on reconstruction. */
  size: number;
  sha256: string;
}

/** One exchange. Times are ms since the epoch on the proxy's clock. */
export interface CaptureRecord {
  v: 1;
  id: string;
  times: { start: number; firstByte?: number; end?: number };
  /** The session label (`source` says which hint), or the conversation id when the request has no label. */
  session: { key: string; source: string };
  conversation?: CapturedConversation;
  /**
   * The request's output budget, when it set one: `max_tokens` (Anthropic, OpenAI Chat's older name),
   * `max_completion_tokens` (OpenAI Chat) or `max_output_tokens` (Responses).
   */
  maxTokens?: number;
  /** OpenAI request options the cache model reads (retention, breakpoint mode), when sent. */
  cacheOptions?: { retention?: string; mode?: string };
  provider: 'anthropic' | 'openai' | 'unknown';
  route: string;
  method: string;
  model?: string;
  /** The model the response names, when it says one. */
  responseModel?: string;
  status?: number;
  /**
   * How the exchange ended: `complete`, `error` (status >= 400), `upstream_error` (the upstream could not
   * be reached, or ended a 2xx stream with an error event), `client_aborted`,
   * `upstream_reset`, `refused` (the proxy could not send it and answered 400 itself), `unparsable` (a
   * WebSocket message that is not JSON, relayed as it came).
   */
  outcome: string;
  /** `websocket`: a `response.create` on a Responses WebSocket (method `POST`, as its HTTP twin); absent for HTTP. */
  transport?: 'websocket';
  stream: boolean;
  responseId?: string;
  stopReason?: string;
  usage?: { raw: Record<string, unknown>; normalized?: NormalizedUsage };
  diagnostics?: unknown;
  /** Non-secret headers that affect caching or identify the client. */
  headers: Record<string, string>;
  betas: string[];
  requestBytes: number;
  responseBytes?: number;
  prefix?: CapturedPrefix;
  /**
   * A Responses request with `previous_response_id`: the response it continues, and how much of that
   * context the proxy knew (`known`; `output_unknown`: some response's output items were not seen and stand
   * as a block sized from usage; `unknown`: the context was never seen, one block sized from usage).
   * `prefix` is then the whole chained prefix (the context, then the request's own input).
   */
  chain?: { previous: string; context: 'known' | 'output_unknown' | 'unknown' };
  /** Why the request body could not be read into a prefix (it was forwarded untouched anyway). */
  parseError?: string;
  fixes: FixNote[];
  /** `full` mode: the exact bytes forwarded upstream. */
  body?: StoredBody;
  /**
   * `full` mode: the body was not kept because the writer was too far behind (a burst faster than the
   * disk); the rest of the record is whole.
   */
  bodyDropped?: true;
  /** `full` mode, when a fix changed the body: the bytes the client sent. */
  clientBody?: StoredBody;
  error?: string;
}

function compactParam(v: unknown): unknown {
  if (v === null || typeof v !== 'object') return v;
  const s = stableJson(v);
  return s.length <= 200 ? v : { sha256: hash('sha256', s, 'hex') };
}

/** The last prefixes captured (their blocks, and the captured blocks made from them), newest first. */
const recentCaptures: Array<{ blocks: readonly PrefixBlock[]; captured: CapturedBlock[] }> = [];
/** How many recent prefixes a capture extends its blocks from: one per interleaved conversation. */
const RECENT_CAPTURES = 64;

/**
 * Whether block `n` of a recent capture is this prefix's: the same object, or one rebuilt only because it
 * moved in the body (the same cumulative key: the same content up to it), which does not end the run:
 * Claude Code's tools and system come after its messages, and the message blocks after them are still the
 * recent capture's own objects. A function of its own, not a closure per recent capture (64 made per record).
 */
function sameBlockAt(recent: readonly PrefixBlock[], blocks: readonly PrefixBlock[], n: number): boolean {
  return recent[n] === blocks[n] || (recent[n] as PrefixBlock).hash === blocks[n]?.hash;
}

/**
 * The captured blocks of `blocks`. The leading blocks the prefix model handed over from a recent request
 * (the same objects) are captured as the same objects too: the records of a conversation share them, and
 * the live analysis extends from them in O(the new turn). Blocks are never changed once built.
 */
function* capturedBlocksSteps(
  blocks: readonly PrefixBlock[],
  capture: (b: PrefixBlock) => CapturedBlock,
): Generator<void, CapturedBlock[]> {
  let from: { blocks: readonly PrefixBlock[]; captured: CapturedBlock[] } | undefined;
  let shared = 0;
  for (const r of recentCaptures) {
    // Only one that also shares block `shared` can share more than the best so far: one look rules the
    // others out (32 conversations sending the same tools would each be walked through those tools).
    if (shared > 0 && (r.blocks.length <= shared || !sameBlockAt(r.blocks, blocks, shared))) continue;
    let n = 0;
    const max = Math.min(r.blocks.length, blocks.length);
    while (n < max && sameBlockAt(r.blocks, blocks, n)) n++;
    if (n > shared) {
      shared = n;
      from = r;
      // All of them shared (a request resent, or its conversation's previous one extended to this): no
      // later capture can share more, and the first to share the most is the one taken either way.
      if (n === blocks.length) break;
    }
  }
  const captured: CapturedBlock[] = new Array(shared);
  for (let i = 0; i < shared; i++) {
    const b = blocks[i] as PrefixBlock;
    captured[i] = from?.blocks[i] === b ? (from.captured[i] as CapturedBlock) : capture(b);
  }
  for (let i = shared; i < blocks.length; i++) {
    if ((i - shared) % STEP_ITEMS === STEP_ITEMS - 1) yield;
    captured.push(capture(blocks[i] as PrefixBlock));
  }
  // Another record may have been captured between the steps: `from` is looked up again.
  const at = recentCaptures.indexOf(from as (typeof recentCaptures)[number]);
  if (at >= 0 && shared === (from as { blocks: readonly PrefixBlock[] }).blocks.length)
    recentCaptures.splice(at, 1);
  recentCaptures.unshift({ blocks, captured });
  if (recentCaptures.length > RECENT_CAPTURES) recentCaptures.length = RECENT_CAPTURES;
  return captured;
}

/** The prefix as the capture keeps it (no text in any mode: the full body carries the text). */
export function capturePrefix(prefix: Prefix): CapturedPrefix {
  return drainSteps(capturePrefixSteps(prefix));
}

/** {@link capturePrefix} in bounded steps (it yields every {@link STEP_ITEMS} new blocks): the same record. */
export function* capturePrefixSteps(prefix: Prefix): Generator<void, CapturedPrefix> {
  const params = { tools: {}, system: {}, messages: {} } as CapturedPrefix['params'];
  for (const level of ['tools', 'system', 'messages'] as const) {
    for (const [k, v] of Object.entries(prefix.levels[level].params)) params[level][k] = compactParam(v);
  }
  const blocks = yield* capturedBlocksSteps(prefix.blocks, (b) => {
    const c: CapturedBlock = {
      level: b.level,
      index: b.index,
      kind: b.kind,
      hash: b.hash,
      id: b.contentHash.slice(0, 32),
      size: b.span.end - b.span.start,
      tokens: b.tokens,
      at: b.span.start,
    };
    if (b.name !== undefined) c.name = b.name;
    if (b.messageIndex !== undefined) c.message = b.messageIndex;
    if (b.partIndex !== undefined) c.part = b.partIndex;
    if (b.role !== undefined) c.role = b.role;
    if (b.cacheControl)
      c.cc = {
        type: String(b.cacheControl.type),
        ...(b.cacheControl.ttl ? { ttl: b.cacheControl.ttl } : {}),
      };
    if (b.emptyText) c.empty = true;
    if (b.toolParts) c.tp = [b.toolParts.schema, b.toolParts.description, b.toolParts.other];
    return c;
  });
  // Keys set in order rather than a spread before `folds` (the slower path for a literal on Node 20).
  const out = { format: prefix.format, totalTokens: prefix.totalTokens, blocks, params } as CapturedPrefix;
  if (prefix.deferredTools.length) out.deferredTools = prefix.deferredTools;
  out.folds = {
    tools: prefix.levels.tools.foldHash,
    system: prefix.levels.system.foldHash,
    messages: prefix.levels.messages.foldHash,
  };
  if (prefix.autoCacheControl)
    out.auto = {
      type: String(prefix.autoCacheControl.type),
      ...(prefix.autoCacheControl.ttl ? { ttl: prefix.autoCacheControl.ttl } : {}),
    };
  return out;
}

/** Headers that are safe and useful to keep. Credentials and cookies never are. */
const KEPT_HEADERS = [
  'anthropic-beta',
  'anthropic-version',
  'user-agent',
  'x-claude-code-session-id',
  'x-stainless-lang',
  'x-stainless-package-version',
  'openai-beta',
  'x-cacheward-session',
];

export function keptHeaders(headers: Headers): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of KEPT_HEADERS) {
    const v = headers.get(name);
    if (v !== null) out[name] = v;
  }
  return out;
}

/**
 * Two captured blocks that are the same but for where they are in the body (`at`). Every other field is
 * compared: the cumulative key does not cover them all (a billing line, left out of every key, still counts
 * in the system prompt's part numbers).
 */
export function sameBlockMoved(a: CapturedBlock, b: CapturedBlock): boolean {
  if (a === b) return true;
  return (
    a.hash === b.hash &&
    a.id === b.id &&
    a.level === b.level &&
    a.index === b.index &&
    a.kind === b.kind &&
    a.name === b.name &&
    a.message === b.message &&
    a.part === b.part &&
    a.role === b.role &&
    a.empty === b.empty &&
    a.size === b.size &&
    a.tokens === b.tokens &&
    a.cc?.type === b.cc?.type &&
    a.cc?.ttl === b.cc?.ttl &&
    a.tp?.join() === b.tp?.join()
  );
}

/** Runs `[first, count, delta]` of shared blocks that moved in the body by `delta` bytes. */
export type MovedRuns = Array<[number, number, number]>;

/**
 * How `blocks` continue `prev` (a session's previous record): how many leading blocks they share, and the
 * runs of those that moved in the body (Claude Code sends its tools and system after its messages).
 */
export function blockDelta(
  blocks: readonly CapturedBlock[],
  prev: readonly CapturedBlock[],
): { shared: number; moved: MovedRuns } {
  const moved: MovedRuns = [];
  let shared = 0;
  while (shared < blocks.length && shared < prev.length) {
    const a = blocks[shared] as CapturedBlock;
    const b = prev[shared] as CapturedBlock;
    if (!sameBlockMoved(a, b)) break;
    const delta = a.at - b.at;
    if (delta !== 0) {
      const run = moved[moved.length - 1];
      if (run && run[0] + run[1] === shared && run[2] === delta) run[1]++;
      else moved.push([shared, 1, delta]);
    }
    shared++;
  }
  return { shared, moved };
}

/** A moved-blocks run as the writer writes it: `[first, count, delta]`, integers, first and count >= 0. */
function isRun(r: unknown): r is [number, number, number] {
  return (
    Array.isArray(r) &&
    r.length === 3 &&
    r.every((x) => Number.isInteger(x)) &&
    (r[0] as number) >= 0 &&
    (r[1] as number) >= 0
  );
}

/**
 * The blocks of a record stored against `prev` ({@link blockDelta}): the first `shared` of `prev` (the same
 * objects; those that moved copied at their new offset), then `rest`. `movedOk` is false when `moved` is
 * not a list of runs (the shared blocks keep their base's offsets then).
 */
export function applyBlockDelta(
  prev: readonly CapturedBlock[],
  base: { shared: number; moved?: unknown },
  rest: readonly CapturedBlock[],
): { blocks: CapturedBlock[]; movedOk: boolean } {
  const shared = Math.min(base.shared, prev.length);
  // One array per record, of its final length (a slice and pushes left a half-empty tail), made by the
  // array's builtin copies (several times faster than an element loop); `rest` is written over its end.
  const blocks =
    prev.length >= shared + rest.length
      ? prev.slice(0, shared + rest.length)
      : (prev.length === shared ? prev : prev.slice(0, shared)).concat(rest);
  const moved: unknown = base.moved ?? [];
  const runs = Array.isArray(moved) && moved.every(isRun) ? moved : [];
  for (const [first, count, delta] of runs) {
    for (let i = first; i < Math.min(first + count, shared); i++) {
      const b = blocks[i] as CapturedBlock;
      blocks[i] = { ...b, at: b.at + delta };
    }
  }
  for (let i = 0; i < rest.length; i++) blocks[shared + i] = rest[i] as CapturedBlock;
  return { blocks, movedOk: runs === moved };
}
