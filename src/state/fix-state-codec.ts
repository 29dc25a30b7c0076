// One request's fix state and forwarded pair as one JSON document, for stores outside the process (Redis).
// Pure: encode and decode only; a document that does not decode is reported, never half-used.

import type { ForwardedPair, KeyedBlocks } from '../fixes/stability.js';
import type { FixStates } from './fix-state-store.js';

/** What a request leaves for the requests that extend it. */
export interface RequestFixState {
  states: FixStates;
  pair: ForwardedPair;
}

interface Doc {
  v: 1;
  states: Record<string, unknown>;
  /** Blocks as "hash:cumulativeTokens" joined by commas: what the stability guard compares. */
  client: string;
  forwarded: string;
}

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

export function encodeFixState(s: RequestFixState): string {
  const doc: Doc = {
    v: 1,
    states: Object.fromEntries(s.states),
    client: packBlocks(s.pair.client),
    forwarded: packBlocks(s.pair.forwarded),
  };
  return JSON.stringify(doc);
}

/** The decoded document; throws (with what was wrong) when it is not one this version wrote. */
export function decodeFixState(text: string): RequestFixState {
  const doc = JSON.parse(text) as Partial<Doc>;
  if (doc.v !== 1 || typeof doc.states !== 'object' || doc.states === null)
    throw new Error('not a cacheward fix state document');
  if (typeof doc.client !== 'string' || typeof doc.forwarded !== 'string')
    throw new Error('fix state document without its forwarded pair');
  return {
    states: new Map(Object.entries(doc.states)),
    pair: { client: unpackBlocks(doc.client), forwarded: unpackBlocks(doc.forwarded) },
  };
}
