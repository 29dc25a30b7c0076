// One request's fix state and forwarded pair, for stores outside the process (Redis): a small document
// per request, and each fix's state as a part named by its content hash, so a state that did not change
// is neither sent nor parsed again. Pure: encode and decode only; a bad document is reported, never half-used.

import { hash } from 'node:crypto';
import type { ForwardedPair, KeyedBlocks } from '../fixes/stability.js';
import type { FixStates } from './fix-state-store.js';

/** What a request leaves for the requests that extend it. */
export interface RequestFixState {
  states: FixStates;
  pair: ForwardedPair;
}

/** A request's document and the parts it names (hash → JSON of one fix's state). */
export interface EncodedFixState {
  doc: string;
  parts: Map<string, string>;
}

// The document: "v2", then "fix=hash …", then the client's and the forwarded blocks as
// "hash:cumulativeTokens" joined by commas (what the stability guard compares), one per line.
const packBlocks = (blocks: KeyedBlocks): string =>
  blocks.map((b) => `${b.hash}:${b.cumulativeTokens}`).join(',');

function unpackBlocks(text: string): KeyedBlocks {
  if (text === '') return [];
  return text.split(',').map((part) => {
    const at = part.lastIndexOf(':');
    const cumulativeTokens = Number(part.slice(at + 1));
    if (at <= 0 || !Number.isFinite(cumulativeTokens)) throw new Error(`bad block entry "${part}"`);
    return { hash: part.slice(0, at), cumulativeTokens };
  });
}

/** A state object's JSON and hash, remembered by identity (fixes never change a state they were given). */
export type PartMemo = WeakMap<object, { json: string; hash: string }>;

export function encodeFixState(s: RequestFixState, memo?: PartMemo): EncodedFixState {
  const parts = new Map<string, string>();
  const names: string[] = [];
  for (const [name, state] of s.states) {
    const known = memo && typeof state === 'object' && state !== null ? memo.get(state) : undefined;
    const json = known?.json ?? JSON.stringify(state) ?? 'null';
    const h = known?.hash ?? hash('sha1', json, 'hex');
    if (memo && !known && typeof state === 'object' && state !== null) memo.set(state, { json, hash: h });
    parts.set(h, json);
    names.push(`${name}=${h}`);
  }
  const doc = ['v2', names.join(' '), packBlocks(s.pair.client), packBlocks(s.pair.forwarded)].join('\n');
  return { doc, parts };
}

/** The part hashes a document names, by fix. Throws when it is not a document this version wrote. */
export function partsOf(doc: string): Map<string, string> {
  const lines = doc.split('\n', 2);
  if (lines[0] !== 'v2') throw new Error('not a cacheward fix state document');
  const out = new Map<string, string>();
  for (const item of (lines[1] ?? '').split(' ')) {
    if (!item) continue;
    const at = item.lastIndexOf('=');
    if (at <= 0) throw new Error(`bad part entry "${item}"`);
    out.set(item.slice(0, at), item.slice(at + 1));
  }
  return out;
}

/** Decodes a document, taking each fix's state from `part` (by hash); throws if one is missing. */
export function decodeFixState(doc: string, part: (hash: string) => unknown): RequestFixState {
  const lines = doc.split('\n');
  if (lines[0] !== 'v2' || lines.length !== 4) throw new Error('not a cacheward fix state document');
  const states = new Map<string, unknown>();
  for (const [name, h] of partsOf(doc)) {
    const state = part(h);
    if (state === undefined) throw new Error(`the state of ${name} (${h}) is missing`);
    states.set(name, state);
  }
  return {
    states,
    pair: { client: unpackBlocks(lines[2] as string), forwarded: unpackBlocks(lines[3] as string) },
  };
}
