// The content hash Claude Code writes into its transcripts: sha256 of a value's JSON with object keys sorted
// at every depth (and, for messages, `cache_control` left out at every depth). Pure; used only to match
// messages to the hashes a request record names, never as an identity of the prefix model.

import { createHash } from 'node:crypto';
import { stableJson } from '../prefix/stable-json.js';

/** sha256 (hex) of the value's sorted-key JSON. */
export function stableHash(value: unknown): string {
  return createHash('sha256').update(stableJson(value)).digest('hex');
}

/** Sorted-key JSON with every `cache_control` member left out, at any depth. */
export function stableJsonWithoutMarkers(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value))
    return `[${value.map((v) => (v === undefined ? 'null' : stableJsonWithoutMarkers(v))).join(',')}]`;
  const o = value as Record<string, unknown>;
  const entries = Object.keys(o)
    .sort()
    .filter((k) => k !== 'cache_control' && o[k] !== undefined)
    .map((k) => `${JSON.stringify(k)}:${stableJsonWithoutMarkers(o[k])}`);
  return `{${entries.join(',')}}`;
}
