// Lets a conversation's records share one block array: each keeps its own first blocks (moved ones), a range
// of the array, and its own last blocks. It never changes what a record's blocks are, only what holds them.

/** The blocks of a line of records: each member's are its own `head`, `blocks[head.length, to)`, its `tail`. */
export interface BlockLine<T> {
  blocks: T[];
  /** The member whose own array `blocks` is. */
  latest: LineMember<T> | undefined;
  members: number;
  /** The range of `blocks` earlier members take from it (empty: none does): a new array must keep it. */
  from: number;
  to: number;
}

/** Where a member's blocks are while it is on a line and not its latest. */
export interface LineMember<T> {
  line: BlockLine<T>;
  /** Its own first blocks (that the line's array has as other objects). */
  head: T[];
  /** The end of the range it takes from the line's array (it starts at `head.length`). */
  to: number;
  /** Its own blocks past `to`. */
  tail: T[];
}

/** A range of two block lists that hold the very same objects: `[from, to)`. */
export interface SharedRange {
  from: number;
  to: number;
}

const NONE: never[] = [];

/** A line of one member, whose own array it is. */
export function lineOf<T>(blocks: T[]): BlockLine<T> {
  return { blocks, latest: undefined, members: 0, from: Number.POSITIVE_INFINITY, to: 0 };
}

/**
 * The range `b` shares with `a` as the very same objects, counted one by one: past the tools and system
 * blocks up to the last that is an object of `b`'s own (the capture reader gives a block that moved in the
 * body an object of its own, and keeps its base's objects after it: Claude Code's tools and system, then
 * its messages; or a system prompt after the messages, with the tools before them where they were).
 */
export function sharedRange<T extends { level: string }>(a: readonly T[], b: readonly T[]): SharedRange {
  const max = Math.min(a.length, b.length);
  let from = 0;
  for (let i = 0; i < max && (b[i] as T).level !== 'messages'; i++) if (a[i] !== b[i]) from = i + 1;
  let to = from;
  while (to < max && a[to] === b[to]) to++;
  return to > from ? { from, to } : { from: 0, to: 0 };
}

/** Whether `blocks`, sharing `range` with the line's array, can take its place (earlier members keep theirs). */
export function canTakeOver<T>(line: BlockLine<T>, range: SharedRange): boolean {
  return range.to > range.from && range.from <= line.from && range.to >= line.to;
}

/**
 * `blocks` become the line's array: its latest member keeps its own blocks around `range` (returned: its
 * head and tail, for the caller to empty that member's own array and to count what it now holds).
 */
export function takeOver<T>(
  line: BlockLine<T>,
  blocks: T[],
  range: SharedRange,
): { member: BlockLine<T>['latest']; head: T[]; tail: T[] } {
  const latest = line.latest;
  const old = line.blocks;
  let head: T[] = NONE;
  let tail: T[] = NONE;
  if (latest) {
    head = range.from > 0 ? old.slice(0, range.from) : NONE;
    tail = range.to < old.length ? old.slice(range.to) : NONE;
    latest.head = head;
    latest.to = range.to;
    latest.tail = tail;
    if (range.from < line.from) line.from = range.from;
    if (range.to > line.to) line.to = range.to;
  }
  line.blocks = blocks;
  return { member: latest, head, tail };
}

/** A member's blocks, whole: the line's array itself while it is the latest, else a new array. */
export function memberBlocks<T>(member: LineMember<T>): T[] {
  const { line, head, to, tail } = member;
  if (line.latest === member) return line.blocks;
  const from = head.length;
  // No head (nothing moved): the line's own range copied whole, the tail written over what follows it (the
  // array's builtin copies run several times faster than an element loop, and make a packed array).
  if (from === 0) {
    const n = to + tail.length;
    const out = line.blocks.slice(0, n);
    if (out.length < n) return tail.length ? out.slice(0, to).concat(tail) : out;
    for (let i = 0; i < tail.length; i++) out[to + i] = tail[i] as T;
    return out;
  }
  const out = new Array<T>(head.length + (to - from) + tail.length);
  let k = 0;
  for (let i = 0; i < head.length; i++) out[k++] = head[i] as T;
  for (let i = from; i < to; i++) out[k++] = line.blocks[i] as T;
  for (let i = 0; i < tail.length; i++) out[k++] = tail[i] as T;
  return out;
}
