// A canonical token over a message list (stable JSON with sorted keys, sha256), and the stale guard that
// blocks a background write when the live conversation no longer matches the one the work was computed from.

import { createHash } from 'node:crypto';
import type { Decision } from '../core/decision.js';
import { stableJson } from '../prefix/stable-json.js';

/** The token of a message list: the same messages give the same token whatever their key order. */
export function snapshotToken(messages: readonly unknown[]): string {
  return createHash('sha256').update(stableJson(messages)).digest('hex');
}

/** The one decision shape: the write may go ahead, or why not. */
export type StaleDecision = Decision;

/**
 * Whether a write computed from `snapshot` may be applied to `live`. Fails closed: missing live state,
 * something that is not a list, or a list holding anything but objects is a refusal.
 */
export function checkNotStale(snapshot: string, live: unknown): StaleDecision {
  if (live === undefined || live === null)
    return { ok: false, reason: 'the live conversation is missing: refusing to write' };
  if (!Array.isArray(live))
    return { ok: false, reason: 'the live conversation is not a list of messages: refusing to write' };
  if (live.some((m) => m === null || typeof m !== 'object' || Array.isArray(m))) {
    return {
      ok: false,
      reason: 'the live conversation holds something that is not a message object: refusing to write',
    };
  }
  const token = snapshotToken(live);
  if (token !== snapshot) {
    return {
      ok: false,
      reason: 'the conversation moved on since this work started: the result is stale and was not written',
    };
  }
  return { ok: true };
}

/** A stale guard bound to one snapshot. */
export class StaleGuard {
  readonly snapshot: string;
  constructor(messages: readonly unknown[]) {
    this.snapshot = snapshotToken(messages);
  }
  check(live: unknown): StaleDecision {
    return checkNotStale(this.snapshot, live);
  }
}
