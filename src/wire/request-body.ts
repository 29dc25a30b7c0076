// Reads a provider request body (Anthropic Messages, OpenAI Chat Completions, OpenAI Responses) into its
// prompt units with byte spans. It never alters or drops a field: the original bytes stay the source of truth.

import { isUtf8 } from 'node:buffer';
import { JsonSyntaxError, WireFormatError } from '../core/errors.js';
import { drainSteps, STEP_ITEMS } from '../core/steps.js';
import {
  byteToPosition,
  decodeKey,
  decodeUtf8,
  itemsTakenFrom,
  MAX_JSON_DEPTH,
  parseSpan,
  type ScanNode,
  type ScanObject,
  type ScanShape,
  scanJson,
  scanJsonSteps,
  sharedByteCount,
} from './json-scan.js';

/** The request formats cacheward understands. */
export type WireFormat = 'anthropic-messages' | 'openai-chat' | 'openai-responses';

/** The three levels of the cached prefix, in prompt order. */
export type PrefixLevel = 'tools' | 'system' | 'messages';

/** A half-open byte range `[start, end)` in the request body. */
export interface ByteSpan {
  start: number;
  end: number;
}

/**
 * How a raw unit's bytes are to be read:
 * `tool` a tool definition; `text` a system string or block; `content` a message content block or a string
 * content; `item` a non-message Responses input item; `tool_call` an entry of a Chat message's `tool_calls`;
 * `empty` a message with no content at all (its role and boundary still shape the prompt).
 */
export type UnitForm = 'tool' | 'text' | 'content' | 'item' | 'tool_call' | 'empty';

/** One unit of the prompt as sent, not yet parsed: where it is and how to read it. */
export interface RawUnit {
  level: PrefixLevel;
  form: UnitForm;
  span: ByteSpan;
  /** The scanned value: an object with its members (each a leaf), or a string leaf. */
  node: ScanNode;
  /** For message-level units: which message (or input item), which part within it. */
  messageIndex?: number;
  partIndex?: number;
  role?: string;
  /** On the first unit of a message: the message's other fields (not content), canonical JSON. */
  messageHeader?: string;
}

/** A request body read into prompt units. `value()` parses the whole body (lazily) with nothing dropped. */
export interface RequestBody {
  format: WireFormat;
  /** The body's bytes (a Buffer view of the input, never a copy of a Buffer). */
  bytes: Buffer;
  root: ScanObject;
  units: RawUnit[];
  /** Top-level fields other than the prompt arrays, parsed. */
  fields: Readonly<Record<string, unknown>>;
  /** Byte spans of every top-level field. */
  fieldSpans: ReadonlyMap<string, ByteSpan>;
  /** The `anthropic-beta` values sent with the request (from the headers option), sorted, de-duplicated. */
  betas: readonly string[];
  /** The depth limit it was scanned with (a later scan takes its nodes over only under the same limit). */
  maxDepth?: number;
  value(): Record<string, unknown>;
}

/** Options for {@link parseRequestBody}. */
export interface ParseRequestOptions {
  /** The format, when known (from the route). Otherwise it is detected from the body. */
  format?: WireFormat;
  /** The request path, e.g. `/v1/messages`; used to pick the format when `format` is not given. */
  route?: string;
  /** Request headers; only `anthropic-beta` is read. Secrets are never kept. */
  headers?: Readonly<Record<string, string | readonly string[] | undefined>>;
  /** Deepest nesting accepted (default `MAX_JSON_DEPTH`, 512); deeper is a `JsonDepthError`. */
  maxDepth?: number;
  /**
   * An earlier body (of the same conversation, say): the scan takes over its nodes for the bytes the two
   * share at the start, so a body that extends it is scanned in time proportional to what is new.
   */
  previous?: RequestBody;
  /** How many leading bytes the input shares with `previous`, when the caller counted them already. */
  previousSharedBytes?: number;
}

/** The members of a block that kind, name, flags and markers need; the rest is skipped without nodes. */
export const BLOCK_KEYS = [
  'type',
  'name',
  'function',
  'defer_loading',
  'input_schema',
  'cache_control',
  'prompt_cache_breakpoint',
  'content',
] as const;
const BLOCK: ScanShape = { members: {}, only: BLOCK_KEYS };
const SHAPE: ScanShape = {
  members: {
    tools: { items: BLOCK },
    functions: { items: BLOCK },
    system: { items: BLOCK },
    messages: { items: { members: { content: { items: BLOCK }, tool_calls: { items: BLOCK } } } },
    input: { items: { members: { content: { items: BLOCK } } } },
  },
};

/**
 * Unit lists that hold a run of an earlier body's very units: which list, where, and how many. The earlier
 * list is held weakly, or every earlier body's units of a conversation would stay alive through the newest.
 */
const takenUnits = new WeakMap<
  readonly RawUnit[],
  { from: WeakRef<readonly RawUnit[]>; at: number; fromAt: number; count: number }
>();

/**
 * The run of an earlier body's units that a body's unit list holds as they are (the messages its scan took
 * over): `units[at + k]` is `from[fromAt + k]` for `k < count`. Undefined when it took none over.
 */
export function unitsTakenOver(
  units: readonly RawUnit[],
): { from: readonly RawUnit[]; at: number; fromAt: number; count: number } | undefined {
  const t = takenUnits.get(units);
  const from = t?.from.deref();
  return t && from ? { from, at: t.at, fromAt: t.fromAt, count: t.count } : undefined;
}

/** Items per bulk push (a spread of many more arguments would overflow the stack). */
const PUSH_CHUNK = 8_192;

const PROMPT_FIELDS = new Set(['tools', 'functions', 'system', 'messages', 'input', 'instructions']);

const encoder = new TextEncoder();

/** Reads a request body. Throws `JsonSyntaxError` (with line and column) or `WireFormatError` (with path). */
export function parseRequestBody(input: Uint8Array | string, options: ParseRequestOptions = {}): RequestBody {
  return drainSteps(parseRequestBodySteps(input, options));
}

/**
 * {@link parseRequestBody} in bounded steps (the scan's, then every few hundred messages), for a caller
 * that spreads a huge body over turns of its event loop. The same parse: `parseRequestBody` runs it to the end.
 */
export function* parseRequestBodySteps(
  input: Uint8Array | string,
  options: ParseRequestOptions = {},
): Generator<void, RequestBody> {
  // A Buffer view (no copy): its indexOf is native and fast, which the scanner relies on.
  const bytes =
    typeof input === 'string'
      ? Buffer.from(encoder.encode(input).buffer)
      : Buffer.isBuffer(input)
        ? input
        : Buffer.from(input.buffer, input.byteOffset, input.byteLength);
  const maxDepth = options.maxDepth ?? MAX_JSON_DEPTH;
  const prev = options.previous;
  const previous =
    prev?.root && (prev.maxDepth ?? MAX_JSON_DEPTH) === maxDepth && prev.bytes.length
      ? { root: prev.root, sameBytes: options.previousSharedBytes ?? sharedByteCount(bytes, prev.bytes) }
      : undefined;
  // JSON is UTF-8 (RFC 8259): invalid bytes are refused here, never silently replaced by U+FFFD later.
  // The bytes shared with the previous body (checked when it was read) are not checked again: the check
  // starts at the start of a character of the previous body, so what precedes it is whole characters.
  let checkFrom = previous && prev ? previous.sameBytes : 0;
  while (checkFrom > 0 && ((prev?.bytes[checkFrom] ?? 0) & 0xc0) === 0x80) checkFrom--;
  if (!isUtf8(checkFrom ? bytes.subarray(checkFrom) : bytes)) {
    const at = firstInvalidUtf8(bytes);
    throw new JsonSyntaxError(
      `the body is not valid UTF-8 (invalid byte 0x${(bytes[at] ?? 0).toString(16)} at byte ${at})`,
      byteToPosition(bytes, at),
    );
  }
  const root = yield* scanJsonSteps(bytes, SHAPE, maxDepth, previous);
  if (root.type !== 'object') {
    throw new WireFormatError('$', 'a request body must be a JSON object', byteToPosition(bytes, root.start));
  }
  const fields: Record<string, unknown> = {};
  const fieldSpans = new Map<string, ByteSpan>();
  for (const [key, node] of root.members) {
    fieldSpans.set(key, { start: node.start, end: node.end });
    if (!PROMPT_FIELDS.has(key)) fields[key] = parseSpan(bytes, node.start, node.end);
  }
  const format = options.format ?? formatFromRoute(options.route) ?? detectFormat(bytes, root);
  const units: RawUnit[] = [];
  const reader = new RawUnitCollector(bytes, units, previous ? prev : undefined);
  if (format === 'anthropic-messages') yield* reader.anthropic(root);
  else if (format === 'openai-chat') yield* reader.openaiChat(root);
  else yield* reader.openaiResponses(root);
  let parsed: Record<string, unknown> | undefined;
  return {
    format,
    bytes,
    root,
    units,
    fields,
    fieldSpans,
    betas: readBetas(options.headers),
    maxDepth,
    value() {
      parsed ??= parseSpan(bytes, root.start, root.end) as Record<string, unknown>;
      return parsed;
    },
  };
}

/** The offset of the first byte that breaks UTF-8 (only called once `isUtf8` said one does). */
function firstInvalidUtf8(b: Uint8Array): number {
  let i = 0;
  while (i < b.length) {
    const c = b[i] as number;
    const len =
      c < 0x80 ? 1 : c >= 0xc2 && c < 0xe0 ? 2 : c >= 0xe0 && c < 0xf0 ? 3 : c >= 0xf0 && c < 0xf5 ? 4 : 0;
    if (len === 0 || i + len > b.length) return i;
    // Continuation bytes, and the overlong / surrogate / out-of-range second bytes.
    const second = b[i + 1] as number;
    if (len === 3 && ((c === 0xe0 && second < 0xa0) || (c === 0xed && second > 0x9f))) return i;
    if (len === 4 && ((c === 0xf0 && second < 0x90) || (c === 0xf4 && second > 0x8f))) return i;
    for (let k = 1; k < len; k++) if (((b[i + k] as number) & 0xc0) !== 0x80) return i;
    i += len;
  }
  return b.length;
}

/** The format served on a route, or undefined for a route that carries no prompt. */
export function formatFromRoute(route: string | undefined): WireFormat | undefined {
  if (!route) return undefined;
  const path = route.split('?')[0] ?? '';
  if (/\/messages(\/count_tokens)?$/.test(path)) return 'anthropic-messages';
  if (/\/chat\/completions$/.test(path)) return 'openai-chat';
  if (/\/responses$/.test(path)) return 'openai-responses';
  return undefined;
}

const CHAT_ONLY_FIELDS = [
  'max_completion_tokens',
  'stream_options',
  'response_format',
  'n',
  'logprobs',
  'top_logprobs',
  'frequency_penalty',
  'presence_penalty',
  'seed',
  'parallel_tool_calls',
  'prompt_cache_key',
  'reasoning_effort',
  'functions',
  'logit_bias',
  'verbosity',
];
const ANTHROPIC_ONLY_FIELDS = [
  'system',
  'stop_sequences',
  'top_k',
  'thinking',
  'anthropic_version',
  'output_config',
];

/** Guesses the format of a body with no route: Responses by `input`/`instructions`, else by telltale fields. */
export function detectFormat(bytes: Uint8Array, root: ScanObject): WireFormat {
  return formatEvidence(bytes, root).format;
}

/**
 * The format a body shows, and whether anything in it tells the formats apart (`decisive`): a body with
 * no telltale field or block reads as Anthropic by default, and then is not decisive.
 */
export function detectBodyFormat(input: Uint8Array): { format: WireFormat; decisive: boolean } {
  const bytes = Buffer.isBuffer(input)
    ? input
    : Buffer.from(input.buffer, input.byteOffset, input.byteLength);
  const root = scanJson(bytes, SHAPE);
  if (root.type !== 'object') return { format: 'anthropic-messages', decisive: false };
  return formatEvidence(bytes, root);
}

function formatEvidence(bytes: Uint8Array, root: ScanObject): { format: WireFormat; decisive: boolean } {
  const has = (k: string) => root.members.has(k);
  if (!has('messages') && (has('input') || has('instructions')))
    return { format: 'openai-responses', decisive: true };
  let score = 0;
  for (const k of CHAT_ONLY_FIELDS) if (has(k)) score -= 1;
  for (const k of ANTHROPIC_ONLY_FIELDS) if (has(k)) score += 1;
  const messages = root.members.get('messages');
  if (messages?.type === 'array') {
    const first = messages.items[0];
    if (first?.type === 'object') {
      const role = first.members.get('role');
      const r = role ? parseSpan(bytes, role.start, role.end) : undefined;
      if (r === 'system' || r === 'developer') score -= 2;
    }
    for (const m of messages.items.slice(0, 16)) {
      if (m.type !== 'object') continue;
      if (m.members.has('tool_calls') || m.members.has('tool_call_id')) score -= 2;
      const content = m.members.get('content');
      if (content?.type === 'array') {
        for (const part of content.items.slice(0, 4)) {
          const text = new TextDecoder().decode(
            bytes.subarray(part.start, Math.min(part.end, part.start + 64)),
          );
          if (/"type"\s*:\s*"(tool_use|tool_result|thinking|redacted_thinking|document)"/.test(text))
            score += 2;
          if (/"type"\s*:\s*"(image_url|input_audio)"/.test(text)) score -= 2;
        }
      }
    }
  }
  const tools = root.members.get('tools');
  if (tools?.type === 'array' && tools.items[0]) {
    const t = tools.items[0];
    const text = decodeUtf8(bytes, t.start, t.end);
    if (text.includes('"input_schema"')) score += 2;
    if (/"type"\s*:\s*"function"/.test(text)) score -= 2;
  }
  return { format: score >= 0 ? 'anthropic-messages' : 'openai-chat', decisive: score !== 0 };
}

function readBetas(headers: ParseRequestOptions['headers']): string[] {
  if (!headers) return [];
  const out = new Set<string>();
  for (const [name, value] of Object.entries(headers)) {
    if (name.toLowerCase() !== 'anthropic-beta' || value === undefined) continue;
    const values = typeof value === 'string' ? [value] : value;
    for (const v of values)
      for (const part of v.split(',')) {
        const beta = part.trim();
        if (beta) out.add(beta);
      }
  }
  return [...out].sort();
}

/**
 * Walks a scanned body's tools, system and messages into {@link RawUnit}s, failing on a malformed one (the
 * units' identities and tokens are the prefix model's: prefix/unit-info.ts).
 */
class RawUnitCollector {
  constructor(
    private readonly bytes: Uint8Array,
    private readonly units: RawUnit[],
    /** The body the scan took nodes over from: its units for those very nodes are taken over too. */
    private readonly previous?: RequestBody,
  ) {}

  private fail(path: string, node: ScanNode, detail: string): never {
    throw new WireFormatError(path, detail, byteToPosition(this.bytes, node.start));
  }

  private span(node: ScanNode): ByteSpan {
    return { start: node.start, end: node.end };
  }

  private toolArray(root: ScanObject, key: 'tools' | 'functions'): void {
    const tools = root.members.get(key);
    if (!tools || isNull(tools)) return;
    if (tools.type !== 'array') this.fail(`$.${key}`, tools, 'must be an array of tool definitions');
    tools.items.forEach((tool, i) => {
      if (tool.type !== 'object') this.fail(`$.${key}[${i}]`, tool, 'must be an object');
      this.units.push({ level: 'tools', form: 'tool', span: this.span(tool), node: tool });
    });
  }

  *anthropic(root: ScanObject): Generator<void, void> {
    this.toolArray(root, 'tools');
    const system = root.members.get('system');
    if (system && !isNull(system)) {
      if (system.type === 'array') {
        system.items.forEach((block, i) => {
          if (block.type !== 'object') this.fail(`$.system[${i}]`, block, 'must be an object');
          this.units.push({
            level: 'system',
            form: 'text',
            span: this.span(block),
            node: block,
            partIndex: i,
          });
        });
      } else if (system.type === 'leaf' && system.first === 0x22) {
        this.units.push({
          level: 'system',
          form: 'text',
          span: this.span(system),
          node: system,
          partIndex: 0,
        });
      } else this.fail('$.system', system, 'must be a string or an array of text blocks');
    }
    yield* this.messageArray(root, 'messages', true);
  }

  *openaiChat(root: ScanObject): Generator<void, void> {
    this.toolArray(root, 'tools');
    this.toolArray(root, 'functions');
    yield* this.messageArray(root, 'messages', true);
  }

  *openaiResponses(root: ScanObject): Generator<void, void> {
    this.toolArray(root, 'tools');
    const instructions = root.members.get('instructions');
    if (instructions && !isNull(instructions)) {
      if (instructions.type !== 'leaf' || instructions.first !== 0x22) {
        this.fail('$.instructions', instructions, 'must be a string');
      }
      this.units.push({
        level: 'system',
        form: 'text',
        span: this.span(instructions),
        node: instructions,
        partIndex: 0,
      });
    }
    const input = root.members.get('input');
    if (!input || isNull(input)) return;
    if (input.type === 'leaf' && input.first === 0x22) {
      this.units.push({
        level: 'messages',
        form: 'content',
        span: this.span(input),
        node: input,
        messageIndex: 0,
        partIndex: 0,
        role: 'user',
        messageHeader: '{}',
      });
      return;
    }
    yield* this.messageArray(root, 'input', false);
  }

  /** Messages (or Responses input items): one unit per content part; a message's own fields go in its header. */
  private *messageArray(
    root: ScanObject,
    key: 'messages' | 'input',
    required: boolean,
  ): Generator<void, void> {
    const messages = root.members.get(key);
    if (!messages) {
      if (required) this.fail(`$.${key}`, root, 'Field required');
      return;
    }
    if (messages.type !== 'array') this.fail(`$.${key}`, messages, 'must be an array');
    const items = messages.items;
    for (let m = this.takeOver(key, items); m < items.length; m++) {
      if (m % STEP_ITEMS === STEP_ITEMS - 1) yield;
      const message = items[m] as ScanNode;
      if (message.type !== 'object') this.fail(`$.${key}[${m}]`, message, 'must be an object');
      const roleNode = message.members.get('role');
      if (key === 'input' && !roleNode) {
        // A Responses item that is not a message (function_call, function_call_output, reasoning, ...).
        this.add('item', message, m, 0, undefined, undefined);
        continue;
      }
      if (!roleNode) this.fail(`$.${key}[${m}]`, message, 'missing "role"');
      if (roleNode.type !== 'leaf' || roleNode.first !== 0x22) {
        this.fail(`$.${key}[${m}].role`, roleNode, 'must be a string');
      }
      const role = decodeKey(this.bytes, roleNode.start, roleNode.end);
      const header = this.header(message);
      const content = message.members.get('content');
      let part = 0;
      if (content && !isNull(content)) {
        if (content.type === 'array') {
          for (let i = 0; i < content.items.length; i++) {
            const block = content.items[i] as ScanNode;
            if (block.type !== 'object')
              this.fail(`$.${key}[${m}].content[${i}]`, block, 'must be an object');
            this.add('content', block, m, part, role, part === 0 ? header : undefined);
            part++;
          }
        } else if (content.type === 'leaf' && content.first === 0x22) {
          this.add('content', content, m, part++, role, header);
        } else this.fail(`$.${key}[${m}].content`, content, 'must be a string or an array of content blocks');
      }
      const toolCalls = message.members.get('tool_calls');
      if (toolCalls && !isNull(toolCalls)) {
        if (toolCalls.type !== 'array') this.fail(`$.${key}[${m}].tool_calls`, toolCalls, 'must be an array');
        for (let i = 0; i < toolCalls.items.length; i++) {
          const call = toolCalls.items[i] as ScanNode;
          if (call.type !== 'object') this.fail(`$.${key}[${m}].tool_calls[${i}]`, call, 'must be an object');
          this.add('tool_call', call, m, part, role, part === 0 ? header : undefined);
          part++;
        }
      }
      // A message with no content still shapes the prompt (its role and boundary): keep it as an empty unit.
      if (part === 0) this.add('empty', message, m, 0, role, header);
    }
  }

  /**
   * The units of the leading messages whose nodes the scan took over from the previous body (the same
   * bytes at the same place and index, so the same units), copied from it; returns the first message
   * still to read. A body that extends the previous one reads only its new messages.
   */
  private takeOver(key: 'messages' | 'input', items: readonly ScanNode[]): number {
    const prev = this.previous;
    if (!prev || (prev.format === 'openai-responses') !== (key === 'input')) return 0;
    const before = prev.root.members.get(key);
    if (before?.type !== 'array') return 0;
    const prevUnits = prev.units;
    let j = 0;
    while (j < prevUnits.length && (prevUnits[j] as RawUnit).level !== 'messages') j++;
    // The scan says how many leading items it took over in one go; otherwise they are counted here.
    // The very same array (the scan took the whole `messages` node over: a forwarded body whose edits all
    // come after it) holds its own items, all of them.
    let m = items === before.items ? items.length : (itemsTakenFrom(items, before.items) ?? 0);
    if (m === 0) while (m < items.length && items[m] === before.items[m]) m++;
    if (m === 0) return 0;
    // The previous body's units of those messages: from its first message unit to the first unit of
    // message m (message indices do not decrease along the messages level), copied in bulk.
    let lo = j;
    let hi = prevUnits.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (((prevUnits[mid] as RawUnit).messageIndex ?? 0) < m) lo = mid + 1;
      else hi = mid;
    }
    const at = this.units.length;
    for (let from = j; from < lo; from += PUSH_CHUNK)
      this.units.push(...prevUnits.slice(from, Math.min(lo, from + PUSH_CHUNK)));
    if (lo > j) takenUnits.set(this.units, { from: new WeakRef(prevUnits), at, fromAt: j, count: lo - j });
    return m;
  }

  /** A message's fields other than role and content, canonical JSON (almost always none: `{}`). */
  private header(message: ScanObject): string {
    const others =
      message.members.size -
      (message.members.has('content') ? 2 : 1) -
      (message.members.has('tool_calls') ? 1 : 0);
    if (others <= 0) return '{}';
    const header: Record<string, unknown> = {};
    for (const [k, node] of message.members) {
      if (k === 'role' || k === 'content' || k === 'tool_calls') continue;
      header[k] = parseSpan(this.bytes, node.start, node.end);
    }
    return JSON.stringify(header);
  }

  private add(
    form: UnitForm,
    node: ScanNode,
    messageIndex: number,
    partIndex: number,
    role: string | undefined,
    messageHeader: string | undefined,
  ): void {
    this.units.push({
      level: 'messages',
      form,
      span: { start: node.start, end: node.end },
      node,
      messageIndex,
      partIndex,
      role,
      messageHeader,
    });
  }
}

function isNull(node: ScanNode): boolean {
  return node.type === 'leaf' && node.first === 0x6e;
}
