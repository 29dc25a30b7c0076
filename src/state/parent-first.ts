// Hands on a fleet's records so that each comes after the parent the shared conversation state named for
// it: two proxies publish a conversation's turns in the order their after-response work ends, which is not
// always the order the turns were sent. It never holds a record past its deadline, nor more than a bound.

import { LruMap } from '../core/lru-map.js';

interface Held<T> {
  item: T;
  id: string;
  until: number;
}

export interface ParentFirstOptions {
  /** Ids remembered as handed on (a parent older than these is taken as handed on long ago). Default 16,384. */
  remembered?: number;
  /** Records held at most; past it the one held longest goes on. Default 10,000. */
  maxHeld?: number;
  /** How often held records are looked at for their deadline (ms). Default 100. */
  sweepMs?: number;
}

export class ParentFirst<T> {
  private readonly seen: LruMap<true>;
  /** Held records, by the parent each waits for. */
  private readonly waiting = new Map<string, Held<T>[]>();
  private count = 0;
  private timer: NodeJS.Timeout | undefined;
  private readonly maxHeld: number;
  private readonly sweepMs: number;

  constructor(
    private readonly out: (item: T) => void,
    options: ParentFirstOptions = {},
  ) {
    this.seen = new LruMap(options.remembered ?? 16_384);
    this.maxHeld = options.maxHeld ?? 10_000;
    this.sweepMs = options.sweepMs ?? 100;
  }

  /** Records waiting for their parent. */
  get held(): number {
    return this.count;
  }

  /**
   * Hands `item` on now, or once `parent` has been, or at `until` (ms since the epoch), whichever is first.
   * A record with no parent, or whose parent was handed on already, goes at once.
   */
  add(item: T, id: string, parent: string | undefined, until: number): void {
    if (parent === undefined || this.seen.get(parent) || until <= Date.now()) {
      this.release(item, id);
      return;
    }
    const list = this.waiting.get(parent);
    const held = { item, id, until };
    if (list) list.push(held);
    else this.waiting.set(parent, [held]);
    this.count++;
    if (this.count > this.maxHeld) this.releaseWhere((h) => h === this.oldest());
    if (!this.timer) {
      this.timer = setInterval(() => this.releaseWhere((h) => h.until <= Date.now()), this.sweepMs);
      this.timer.unref();
    }
  }

  /** Everything held goes on now (closing). */
  drain(): void {
    this.releaseWhere(() => true);
  }

  private oldest(): Held<T> | undefined {
    let first: Held<T> | undefined;
    for (const list of this.waiting.values())
      for (const h of list) if (!first || h.until < first.until) first = h;
    return first;
  }

  private releaseWhere(due: (h: Held<T>) => boolean): void {
    const going: Held<T>[] = [];
    for (const [parent, list] of this.waiting) {
      const stay = list.filter((h) => !due(h));
      if (stay.length === list.length) continue;
      for (const h of list) if (due(h)) going.push(h);
      if (stay.length) this.waiting.set(parent, stay);
      else this.waiting.delete(parent);
    }
    this.count -= going.length;
    going.sort((a, b) => a.until - b.until);
    for (const h of going) this.release(h.item, h.id);
    if (this.count === 0 && this.timer) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }

  private release(item: T, id: string): void {
    this.out(item);
    this.seen.set(id, true);
    const children = this.waiting.get(id);
    if (!children) return;
    this.waiting.delete(id);
    this.count -= children.length;
    for (const c of children) this.release(c.item, c.id);
    if (this.count === 0 && this.timer) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }
}
