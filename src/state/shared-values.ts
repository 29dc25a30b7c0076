// Shares equal parts of fix states between conversations: every Claude Code session freezes the same tool
// definitions, and one copy in memory serves them all. Values are treated as immutable; it never mutates one.

import { hash } from 'node:crypto';
import { LruMap } from '../core/lru-map.js';

/** Parts smaller than this (JSON bytes) are not worth a lookup. */
const MIN_BYTES = 256;

export class SharedValues {
  /** Each part seen, to its shared copy (or itself): a part kept from request to request is looked at once. */
  private readonly canonical = new WeakMap<object, object>();
  private readonly pool: LruMap<object>;

  constructor(maxParts = 4_096) {
    this.pool = new LruMap(maxParts);
  }

  /**
   * `state` with the elements of its array fields replaced by shared equal copies; `state` itself when
   * nothing changed. Only plain objects with array fields are looked into (one level: what fixes keep).
   */
  share(state: unknown): unknown {
    if (!state || typeof state !== 'object' || Array.isArray(state)) return state;
    let out: Record<string, unknown> | undefined;
    for (const [key, value] of Object.entries(state)) {
      if (!Array.isArray(value)) continue;
      let arr: unknown[] | undefined;
      for (let i = 0; i < value.length; i++) {
        const el = value[i];
        const shared = this.element(el);
        if (shared !== el) {
          arr ??= value.slice();
          arr[i] = shared;
        }
      }
      if (arr) {
        out ??= { ...(state as Record<string, unknown>) };
        out[key] = arr;
      }
    }
    return out ?? state;
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
