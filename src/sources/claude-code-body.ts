// Rebuilds the body of one Claude Code API call from its transcript's request records: the wire's key
// order, messages as recorded, markers where the record places them. Pure; never reads or writes a file.
//
// What the transcript does not record is filled so that no block moves: the billing line (left out of every
// cache key by the prefix model) is written at its exact length with `xxx` for its three hex digits, and
// `metadata` is left out (it follows every block, so only the body's total length differs). The digest
// check (`requestDigest`) covers parameters, betas, system, tools and messages with their markers.

import { createHash } from 'node:crypto';
import { isObj } from '../core/json.js';
import { stableJson } from '../prefix/stable-json.js';

/** A message as the digest hashes it: a string content is its one text block. */
function digestForm(value: unknown): unknown {
  if (!isObj(value) || typeof value.content !== 'string') return value;
  return { ...value, content: [{ type: 'text', text: value.content }] };
}

/** One message as the transcript holds it, with its JSON made once however many requests resend it. */
export class MessageRef {
  private wireText: string | undefined;
  private sortedText: string | undefined;
  constructor(readonly value: Record<string, unknown>) {}
  /** Its JSON in the transcript's key order (the wire's). */
  wire(): string {
    this.wireText ??= JSON.stringify(this.value);
    return this.wireText;
  }
  /** Its JSON with keys sorted, a string content as its one text block (what the digest hashes). */
  sorted(): string {
    this.sortedText ??= stableJson(digestForm(this.value));
    return this.sortedText;
  }
  /** Bytes held for it (to bound what a reader keeps). */
  get size(): number {
    return (this.wireText?.length ?? 0) + (this.sortedText?.length ?? 0);
  }
}

/** A request's system blocks and tools (`api-request-shape`), their JSON made once. */
export class RequestShape {
  private toolsWire: string | undefined;
  private toolsSorted: string | undefined;
  constructor(
    readonly system: readonly unknown[],
    readonly tools: readonly unknown[],
  ) {}
  toolsWireJson(): string {
    this.toolsWire ??= JSON.stringify(this.tools);
    return this.toolsWire;
  }
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

/**
 * A `role: "system"` message of one plain text block that carries no marker is sent with a string
 * content (Claude Code makes the array only to hold the marker); the transcript keeps the array it was
 * first sent with. Not covered by the digest, which hashes the array.
 */
function wireForm(value: Record<string, unknown>): Record<string, unknown> | undefined {
  if (value.role !== 'system' || !Array.isArray(value.content) || value.content.length !== 1)
    return undefined;
  const block = value.content[0];
  if (!isObj(block) || block.type !== 'text' || typeof block.text !== 'string') return undefined;
  if (Object.keys(block).length !== 2) return undefined;
  return { ...value, content: block.text };
}

const wireCache = new WeakMap<MessageRef, string>();

function messageWire(ref: MessageRef): string {
  let s = wireCache.get(ref);
  if (s === undefined) {
    const collapsed = wireForm(ref.value);
    s = collapsed ? JSON.stringify(collapsed) : ref.wire();
    wireCache.set(ref, s);
  }
  return s;
}

/** The body as Claude Code sent it (but for the billing line's digits and `metadata`). */
export function claudeCodeBody(call: ClaudeCodeCall): Buffer {
  const { system, messages } = markersByTarget(call.markers);
  const parts: string[] = [`{"model":${JSON.stringify(call.model)},"messages":[`];
  call.messages.forEach((ref, i) => {
    if (i > 0) parts.push(',');
    const marks = messages.get(i);
    parts.push(marks ? JSON.stringify(applied(ref.value, marks, 2)) : messageWire(ref));
  });
  const sys = applied(call.shape.system, system, 1) as unknown[];
  parts.push(`],"system":${JSON.stringify([{ type: 'text', text: call.billing }, ...sys])}`);
  parts.push(`,"tools":${call.shape.toolsWireJson()}`);
  const keys = Object.keys(call.params);
  const ordered = [
    ...WIRE_ORDER.filter((k) => k in call.params),
    ...keys.filter((k) => !WIRE_ORDER.includes(k) && k !== 'stream'),
  ];
  for (const k of ordered) parts.push(`,${JSON.stringify(k)}:${JSON.stringify(call.params[k])}`);
  parts.push(',"stream":true}');
  return Buffer.from(parts.join(''));
}

/**
 * The call's `requestDigest` as Claude Code computes it: sha256 of `{...params, betas, system, tools,
 * messages}` with sorted keys and the markers in place (the billing line, `metadata` and `stream` are not in it).
 */
export function claudeCodeDigest(call: ClaudeCodeCall): string {
  const { system, messages } = markersByTarget(call.markers);
  const top: Record<string, () => string> = {};
  for (const [k, v] of Object.entries(call.params)) top[k] = () => stableJson(v);
  top.model = () => stableJson(call.model);
  top.betas = () => stableJson(call.betas);
  top.system = () => stableJson(applied(call.shape.system, system, 1));
  top.tools = () => call.shape.toolsSortedJson();
  const h = createHash('sha256');
  const keys = [...Object.keys(top), 'messages'].sort();
  h.update('{');
  keys.forEach((k, n) => {
    h.update(`${n ? ',' : ''}${JSON.stringify(k)}:`);
    if (k !== 'messages') {
      h.update((top[k] as () => string)());
      return;
    }
    h.update('[');
    call.messages.forEach((ref, i) => {
      if (i > 0) h.update(',');
      const marks = messages.get(i);
      h.update(marks ? stableJson(digestForm(applied(ref.value, marks, 2))) : ref.sorted());
    });
    h.update(']');
  });
  h.update('}');
  return h.digest('hex');
}
