// Rebuilds the body of one Claude Code API call from its transcript's request records: the wire's key
// order, messages as recorded, markers where the record places them. Pure; never reads or writes a file.
//
// What the transcript does not record is filled so that no block moves: the billing line (left out of every
// cache key by the prefix model) is written at its exact length with `xxx` for its three hex digits, and
// `metadata` is left out (it follows every block, so only the body's total length differs). The digest
// check (`requestDigest`) covers parameters, betas, system, tools and messages with their markers.
//
// Each message's bytes are made once, and a call's digest goes on from the hash of the messages it shares with
// the call it extends: a session of n calls costs O(its bytes) in JSON, not O(n × its bytes).

import { createHash, type Hash } from 'node:crypto';
import { isObj } from '../core/json.js';
import { stableJson } from '../prefix/stable-json.js';

/** A message as the digest hashes it: a string content is its one text block. */
function digestForm(value: unknown): unknown {
  if (!isObj(value) || typeof value.content !== 'string') return value;
  return { ...value, content: [{ type: 'text', text: value.content }] };
}

/**
 * A `role: "system"` message of one plain text block is sent with a string content when it carries no
 * marker (Claude Code makes the array only to hold the marker); the transcript keeps the array it was first
 * sent with. Not covered by the digest, which hashes a string content as that block.
 */
function wireForm(value: Record<string, unknown>): Record<string, unknown> {
  if (value.role !== 'system' || !Array.isArray(value.content) || value.content.length !== 1) return value;
  const block = value.content[0];
  if (!isObj(block) || block.type !== 'text' || typeof block.text !== 'string') return value;
  if (Object.keys(block).length !== 2) return value;
  return { ...value, content: block.text };
}

/** One message as the transcript holds it, with its bytes made once however many requests resend it. */
export class MessageRef {
  private wireBytes: Buffer | undefined;
  private sortedText: string | undefined;
  constructor(readonly value: Record<string, unknown>) {}
  /** Its JSON as sent without a marker (the transcript's key order, the wire's). */
  wire(): Buffer {
    this.wireBytes ??= Buffer.from(JSON.stringify(wireForm(this.value)));
    return this.wireBytes;
  }
  /** Its JSON with keys sorted, a string content as its one text block (what the digest hashes). */
  sorted(): string {
    this.sortedText ??= stableJson(digestForm(this.value));
    return this.sortedText;
  }
}

/** A request's system blocks and tools (`api-request-shape`), their JSON made once. */
export class RequestShape {
  private toolsSorted: string | undefined;
  /** The body's end (system, tools, parameters) per marker set, billing line and parameters. */
  readonly ends = new Map<string, Buffer>();
  /** The system blocks' sorted JSON per marker set. */
  readonly systems = new Map<string, string>();
  /** What a digest hashes after the messages, per marker set, parameters, model and betas. */
  readonly digestEnds = new Map<string, Buffer>();
  constructor(
    readonly system: readonly unknown[],
    readonly tools: readonly unknown[],
  ) {}
  toolsSortedJson(): string {
    this.toolsSorted ??= stableJson(this.tools);
    return this.toolsSorted;
  }
}

/** A cache marker by path into `system` or `messages` (`api-request.cacheControl`). */
export interface MarkerAt {
  path: ReadonlyArray<string | number>;
  value: unknown;
}

/** Everything one call's body is made of. */
export interface ClaudeCodeCall {
  model: string;
  /** The recorded parameters but `model` and `betas`, in the order recorded. */
  params: Record<string, unknown>;
  betas: readonly string[];
  shape: RequestShape;
  messages: readonly MessageRef[];
  markers: readonly MarkerAt[];
  /** The billing line's text as the client sends it (the three hex digits unknown). */
  billing: string;
}

/** Where Claude Code puts each top-level field (observed in 2.1.195 and 2.1.332); others go before `stream`. */
const WIRE_ORDER = ['max_tokens', 'thinking', 'context_management', 'output_config'];

/** The billing line Claude Code sends as `system[0]`: its version, entry point and, for a subagent, the flag. */
export function billingLine(version: string, entrypoint: string, subagent: boolean): string {
  return `x-anthropic-billing-header: cc_version=${version}.xxx; cc_entrypoint=${entrypoint};${subagent ? ' cc_is_subagent=true;' : ''}`;
}

/** `value` with `cache_control` set on the object at `rest` (copies along the path; the value is not changed). */
function markedAt(value: unknown, rest: ReadonlyArray<string | number>, marker: unknown): unknown {
  if (rest.length === 0) return isObj(value) ? { ...value, cache_control: marker } : value;
  const [key, ...more] = rest as [string | number, ...Array<string | number>];
  if (Array.isArray(value)) {
    const copy = value.slice();
    copy[key as number] = markedAt(copy[key as number], more, marker);
    return copy;
  }
  if (isObj(value)) {
    // A string content marked on its first block is sent as that one text block.
    const inner = value[key as string];
    const target =
      typeof inner === 'string' && more.length === 1 && more[0] === 0
        ? [{ type: 'text', text: inner }]
        : inner;
    return { ...value, [key]: markedAt(target, more, marker) };
  }
  return value;
}

/** The markers that fall into `messages[i]` (paths below it), and those into `system`. */
function markersByTarget(markers: readonly MarkerAt[]): {
  system: MarkerAt[];
  messages: Map<number, MarkerAt[]>;
} {
  const system: MarkerAt[] = [];
  const messages = new Map<number, MarkerAt[]>();
  for (const m of markers) {
    if (m.path[0] === 'system') system.push(m);
    else if (m.path[0] === 'messages' && typeof m.path[1] === 'number') {
      const list = messages.get(m.path[1]) ?? [];
      list.push(m);
      messages.set(m.path[1], list);
    }
  }
  return { system, messages };
}

function applied(value: unknown, marks: readonly MarkerAt[], skip: number): unknown {
  let out = value;
  for (const m of marks) out = markedAt(out, m.path.slice(skip), m.value);
  return out;
}

const OPEN = Buffer.from('{"model":');
const MESSAGES = Buffer.from(',"messages":[');
const COMMA = Buffer.from(',');

/** `],"system":…,"tools":…,<params>,"stream":true}`: the same for every call of a shape with these markers. */
function bodyEnd(call: ClaudeCodeCall, system: readonly MarkerAt[]): Buffer {
  const key = `${call.billing}\n${JSON.stringify(system)}\n${JSON.stringify(call.params)}`;
  let end = call.shape.ends.get(key);
  if (end) return end;
  const sys = applied(call.shape.system, system, 1) as unknown[];
  const parts = [
    `],"system":${JSON.stringify([{ type: 'text', text: call.billing }, ...sys])}`,
    `,"tools":${JSON.stringify(call.shape.tools)}`,
  ];
  const keys = Object.keys(call.params);
  const ordered = [
    ...WIRE_ORDER.filter((k) => k in call.params),
    ...keys.filter((k) => !WIRE_ORDER.includes(k) && k !== 'stream'),
  ];
  for (const k of ordered) parts.push(`,${JSON.stringify(k)}:${JSON.stringify(call.params[k])}`);
  parts.push(',"stream":true}');
  end = Buffer.from(parts.join(''));
  if (call.shape.ends.size >= 64) call.shape.ends.clear();
  call.shape.ends.set(key, end);
  return end;
}

/** The body as Claude Code sent it (but for the billing line's digits and `metadata`). */
export function claudeCodeBody(call: ClaudeCodeCall): Buffer {
  const { system, messages } = markersByTarget(call.markers);
  const parts: Buffer[] = [OPEN, Buffer.from(JSON.stringify(call.model)), MESSAGES];
  call.messages.forEach((ref, i) => {
    if (i > 0) parts.push(COMMA);
    const marks = messages.get(i);
    parts.push(marks ? Buffer.from(JSON.stringify(applied(ref.value, marks, 2))) : ref.wire());
  });
  parts.push(bodyEnd(call, system));
  return Buffer.concat(parts);
}

/**
 * Where a digest stood after the leading messages that carried no marker: a later call that starts with the
 * same messages (unmarked) and the same parameters goes on from there.
 */
export interface DigestCheckpoint {
  /** The digest's text before its messages (the parameters sorted before `messages`). */
  head: string;
  refs: readonly MessageRef[];
  hash: Hash;
}

/**
 * The call's `requestDigest` as Claude Code computes it: sha256 of `{...params, betas, system, tools,
 * messages}` with sorted keys and the markers in place (the billing line, `metadata` and `stream` are not in
 * it), and where it stood after the messages before the first marked one (for the next call).
 */
export function claudeCodeDigest(
  call: ClaudeCodeCall,
  from?: DigestCheckpoint,
): { digest: string; checkpoint: DigestCheckpoint } {
  const { system, messages } = markersByTarget(call.markers);
  const top: Record<string, () => string> = {};
  for (const [k, v] of Object.entries(call.params)) top[k] = () => stableJson(v);
  top.model = () => stableJson(call.model);
  top.betas = () => stableJson(call.betas);
  top.system = () => {
    const key = JSON.stringify(system);
    let text = call.shape.systems.get(key);
    if (text === undefined) {
      text = stableJson(applied(call.shape.system, system, 1));
      if (call.shape.systems.size >= 64) call.shape.systems.clear();
      call.shape.systems.set(key, text);
    }
    return text;
  };
  top.tools = () => call.shape.toolsSortedJson();
  const keys = [...Object.keys(top), 'messages'].sort();
  const at = keys.indexOf('messages');
  const field = (k: string, n: number) => `${n ? ',' : ''}${JSON.stringify(k)}:${(top[k] as () => string)()}`;
  const head = `{${keys
    .slice(0, at)
    .map((k, n) => field(k, n))
    .join('')}${at ? ',' : ''}"messages":[`;
  // The messages before the first marked one: a checkpoint goes on from as many of them as it holds.
  let unmarked = 0;
  while (unmarked < call.messages.length && !messages.has(unmarked)) unmarked++;
  let h: Hash;
  let done = 0;
  if (
    from &&
    from.head === head &&
    from.refs.length <= unmarked &&
    from.refs.every((r, i) => r === call.messages[i])
  ) {
    h = from.hash.copy();
    done = from.refs.length;
  } else h = createHash('sha256').update(head);
  let checkpoint: DigestCheckpoint | undefined =
    done === unmarked ? { head, refs: call.messages.slice(0, done), hash: h.copy() } : undefined;
  for (let i = done; i < call.messages.length; i++) {
    const ref = call.messages[i] as MessageRef;
    if (i > 0) h.update(',');
    const marks = messages.get(i);
    h.update(marks ? stableJson(digestForm(applied(ref.value, marks, 2))) : ref.sorted());
    if (i + 1 === unmarked) checkpoint = { head, refs: call.messages.slice(0, unmarked), hash: h.copy() };
  }
  // What follows the messages (model, system, tools, …) is the same for every call of a shape with these
  // markers and parameters: made and encoded once.
  const key = `${JSON.stringify(system)}\n${JSON.stringify(call.params)}\n${call.model}\n${call.betas.join()}`;
  let tail = call.shape.digestEnds.get(key);
  if (!tail) {
    tail = Buffer.from(
      `]${keys
        .slice(at + 1)
        .map((k) => field(k, 1))
        .join('')}}`,
    );
    if (call.shape.digestEnds.size >= 64) call.shape.digestEnds.clear();
    call.shape.digestEnds.set(key, tail);
  }
  h.update(tail);
  return {
    digest: h.digest('hex'),
    checkpoint: checkpoint ?? { head, refs: [], hash: createHash('sha256').update(head) },
  };
}
