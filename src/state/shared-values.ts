// Shares equal parts of fix states between conversations: every Claude Code session freezes the same tool
// definitions, and one copy in memory serves them all. Values are treated as immutable; it never mutates one.

import { hash } from 'node:crypto';
import { LruMap } from '../core/lru-map.js';
import { drainSteps, STEP_ITEMS } from '../core/steps.js';

/** Arrays remembered to share the next one that begins like them. */
const RECENT_ARRAYS = 16;

/** Parts smaller than this (JSON bytes) are not worth a lookup. */
const MIN_BYTES = 256;

export class SharedValues {
  /** Each part seen, to its shared copy (or itself): a part kept from request to request is looked at once. */
  private readonly canonical = new WeakMap<object, object>();
  private readonly pool: LruMap<object>;
  /** The arrays shared most recently, newest first: what came in, what went out, its first changed index. */
  private readonly recent: Array<{
    input: readonly unknown[];
    output: readonly unknown[];
    firstChanged: number;
  }> = [];

  constructor(maxParts = 4_096) {
    this.pool = new LruMap(maxParts);
  }

  /**
   * `state` with the elements of its array fields replaced by shared equal copies; `state` itself when
   * nothing changed. Only plain objects with array fields are looked into (one level: what fixes keep).
   */
  share(state: unknown): unknown {
    return drainSteps(this.shareSteps(state));
  }

  /**
   * {@link share} in bounded steps: it yields every {@link STEP_ITEMS} elements it looks up (a huge history
   * seen for the first time is shared over many turns of a shell's event loop). The same result.
   */
  *shareSteps(state: unknown): Generator<void, unknown> {
    if (!state || typeof state !== 'object' || Array.isArray(state)) return state;
    let out: Record<string, unknown> | undefined;
    for (const [key, value] of Object.entries(state)) {
      if (!Array.isArray(value)) continue;
      const arr = yield* this.shareArray(value);
      if (arr !== value) {
        out ??= { ...(state as Record<string, unknown>) };
        out[key] = arr;
      }
    }
    return out ?? state;
  }

  /**
   * `value` with its elements shared (itself when none changed). An array that begins with the elements
   * of one shared recently (a conversation's history, one turn longer) takes that one's answers for them
   * at once, and looks up only the rest.
   */
  private *shareArray(value: readonly unknown[]): Generator<void, unknown[]> {
    let i = 0;
    let arr: unknown[] | undefined;
    const hit = value.length ? this.recent.find((r) => r.input[0] === value[0]) : undefined;
    if (hit) {
      const n = Math.min(hit.input.length, value.length);
      while (i < n && value[i] === hit.input[i]) i++;
      if (hit.firstChanged < i) {
        arr = value.slice();
        for (let k = hit.firstChanged; k < i; k++) arr[k] = hit.output[k];
      }
    }
    let firstChanged = arr ? (hit?.firstChanged ?? 0) : value.length;
    for (let looked = 0; i < value.length; i++) {
      if (++looked % STEP_ITEMS === 0) yield;
      const el = value[i];
      const shared = this.element(el);
      if (shared !== el) {
        arr ??= value.slice();
        arr[i] = shared;
        if (i < firstChanged) firstChanged = i;
      }
    }
    const output = arr ?? (value as unknown[]);
    // (Another array may have been shared between this one's steps: the list is looked up again.)
    const at = hit ? this.recent.indexOf(hit) : -1;
    if (at >= 0) this.recent.splice(at, 1);
    this.recent.unshift({ input: value, output, firstChanged });
    if (this.recent.length > RECENT_ARRAYS) this.recent.pop();
    return output;
  }

  private element(el: unknown): unknown {
    if (!el || typeof el !== 'object') return el;
    const known = this.canonical.get(el);
    if (known) return known;
    const json = JSON.stringify(el);
    let shared: object = el;
    if (json !== undefined && json.length >= MIN_BYTES) {
      const key = hash('sha1', json, 'hex');
      const pooled = this.pool.get(key);
      if (pooled) shared = pooled;
      else this.pool.set(key, el);
    }
    this.canonical.set(el, shared);
    return shared;
  }
}
