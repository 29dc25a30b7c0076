// The range two block lists share as the very same objects: from the start, past a run of moved tools and
// system blocks, and none when a messages block differs first or nothing is shared.
import { describe, expect, it } from 'vitest';
import { canTakeOver, lineOf, memberBlocks, sharedRange, takeOver } from './block-line.js';

type B = { level: string; id: string };
const b = (level: string, id: string): B => ({ level, id });

describe('sharedRange', () => {
  const tools = [b('tools', 't0'), b('system', 's0')];
  const messages = [b('messages', 'm0'), b('messages', 'm1')];
  it('counts from the start when the first blocks are the same objects', () => {
    expect(sharedRange([...tools, ...messages], [...tools, ...messages, b('messages', 'm2')])).toEqual({
      from: 0,
      to: 4,
    });
  });
  it('skips the tools and system blocks that are objects of their own (moved), not messages', () => {
    const moved = tools.map((x) => ({ ...x }));
    expect(sharedRange([...tools, ...messages], [...moved, ...messages])).toEqual({ from: 2, to: 4 });
    const edited = [b('messages', 'm0'), messages[1] as B];
    expect(sharedRange([...tools, ...messages], [...moved, ...edited])).toEqual({ from: 0, to: 0 });
  });
  it('keeps tools in place in the head when a system block after them moved', () => {
    const moved = [tools[0] as B, { ...(tools[1] as B) }];
    expect(sharedRange([...tools, ...messages], [...moved, ...messages])).toEqual({ from: 2, to: 4 });
  });
  it('shares nothing between lists of other objects', () => {
    expect(
      sharedRange(
        messages,
        messages.map((x) => ({ ...x })),
      ),
    ).toEqual({ from: 0, to: 0 });
  });
});

describe('a block line', () => {
  it('gives its former latest its own head, the shared range and its tail back', () => {
    const first = [b('tools', 't0'), b('messages', 'm0'), b('messages', 'm1')];
    const second = [{ ...(first[0] as B) }, first[1] as B, b('messages', 'm1*'), b('messages', 'm2')];
    const line = lineOf(first);
    const member = { line, head: [] as B[], to: first.length, tail: [] as B[] };
    line.latest = member;
    line.members = 1;
    const range = sharedRange(first, second);
    expect(range).toEqual({ from: 1, to: 2 });
    expect(canTakeOver(line, range)).toBe(true);
    takeOver(line, second, range);
    line.latest = undefined;
    const back = memberBlocks(member);
    expect(back).toHaveLength(first.length);
    for (const [i, x] of back.entries()) expect(x).toBe(first[i]);
    // A third list that keeps less of the range than the first member takes cannot replace the array.
    expect(canTakeOver(line, { from: 1, to: 1 })).toBe(false);
    expect(canTakeOver(line, { from: 2, to: 4 })).toBe(false);
  });
});
