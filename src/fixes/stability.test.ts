// The guard's kept pairs: a conversation's consecutive pairs share their equal blocks (the same objects),
// and what they say is the pair's own, whatever the parent held.

import { describe, expect, it } from 'vitest';
import { type ForwardedPair, keyedPair } from './stability.js';

const blocks = (...spec: Array<[string, number]>) =>
  spec.map(([hash, cumulativeTokens]) => ({ hash, cumulativeTokens }));

describe('keyedPair', () => {
  it('keeps each block once per pair, and a block equal to the parent kept pair’s at its place as that object', () => {
    const first = keyedPair({
      client: blocks(['a', 10], ['b', 20]),
      forwarded: blocks(['a', 10], ['B', 20]),
    });
    const client = blocks(['a', 10], ['b', 20], ['c', 30]);
    const forwarded = blocks(['a', 10], ['B', 20], ['C', 30]);
    forwarded[0] = client[0] as (typeof forwarded)[number];
    const next = keyedPair({ client, forwarded }, first);
    expect(next.client[0]).toBe(first.client[0]);
    expect(next.client[1]).toBe(first.client[1]);
    expect(next.forwarded[0]).toBe(next.client[0]);
    expect(next.forwarded[1]).toBe(first.forwarded[1]);
    expect(next.client.map((b) => [b.hash, b.cumulativeTokens])).toEqual([
      ['a', 10],
      ['b', 20],
      ['c', 30],
    ]);
    expect(next.forwarded.map((b) => [b.hash, b.cumulativeTokens])).toEqual([
      ['a', 10],
      ['B', 20],
      ['C', 30],
    ]);
  });

  it('never takes a parent block that differs in key or tokens', () => {
    const parent: ForwardedPair = {
      client: blocks(['a', 10], ['b', 20]),
      forwarded: blocks(['a', 10], ['b', 20]),
    };
    const next = keyedPair(
      { client: blocks(['a', 11], ['x', 20]), forwarded: blocks(['a', 11], ['x', 20]) },
      parent,
    );
    expect(next.client[0]).not.toBe(parent.client[0]);
    expect(next.client.map((b) => [b.hash, b.cumulativeTokens])).toEqual([
      ['a', 11],
      ['x', 20],
    ]);
    expect(next.forwarded.map((b) => [b.hash, b.cumulativeTokens])).toEqual([
      ['a', 11],
      ['x', 20],
    ]);
  });
});
