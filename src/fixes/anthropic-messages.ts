// Helpers the fixes share for Anthropic Messages bodies: read and write them, and see their history as a
// flat sequence of content units (role + block identity), which is what the cache sees. Pure.

import { stableJson } from '../prefix/stable-json.js';

export type Json = Record<string, unknown>;
export type Message = { role: string; content: string | Json[]; [k: string]: unknown };

export const isObj = (v: unknown): v is Json => v !== null && typeof v === 'object' && !Array.isArray(v);

export function readBody(body: Buffer): Json {
  const v = JSON.parse(body.toString('utf8')) as unknown;
  if (!isObj(v)) throw new Error('the body is not a JSON object');
  return v;
}

export function writeBody(value: Json): Buffer {
  return Buffer.from(JSON.stringify(value));
}

/** The blocks of a message (a string content is one text block). */
export function blocksOf(m: Message): Json[] {
  return typeof m.content === 'string' ? [{ type: 'text', text: m.content }] : m.content.filter(isObj);
}

/** A block's identity as the cache sees it: its JSON without the cache marker. */
export function blockId(block: Json): string {
  const { cache_control: _c, ...rest } = block;
  return JSON.stringify(rest);
}

/** One content unit of the history. */
export interface Unit {
  role: string;
  id: string;
  block: Json;
}

export function units(messages: readonly Message[]): Unit[] {
  const out: Unit[] = [];
  for (const m of messages) for (const b of blocksOf(m)) out.push({ role: m.role, id: blockId(b), block: b });
  return out;
}

/** Whether a message carries a cache marker on any block. */
export function marked(m: Message): boolean {
  return Array.isArray(m.content) && m.content.some((b) => isObj(b) && b.cache_control !== undefined);
}

/** A stable fingerprint of a tool definition (for "same tool, same schema"). */
export function toolId(tool: Json): string {
  const { cache_control: _c, ...rest } = tool;
  return stableJson(rest);
}

export const TOOL_CHANGES_BETA = 'mid-conversation-tool-changes-2026-07-01';

/** Adds a value to a comma-separated anthropic-beta header. */
export function withBeta(header: string | undefined, beta: string): string {
  const values = (header ?? '')
    .split(',')
    .map((v) => v.trim())
    .filter(Boolean);
  if (!values.includes(beta)) values.push(beta);
  return values.join(',');
}
