// The fix stage the proxy and the replay gate share: fixes run on the parent request's state, and the
// stability guard keeps whichever outcome keeps the most of the parent's cache. Pure: no clock, no I/O.

import { drainSteps } from '../core/steps.js';
import type { Prefix } from '../prefix/build-prefix.js';
import { sharedPrefixTokens } from '../prefix/first-divergence.js';
import { at, type Fix, type FixContext, type PipelineResult, runFixesSteps } from './fix.js';
import { checkStability, type ForwardedPair } from './stability.js';
import { withdrawalsOnly } from './withdrawal.js';

/** One request at the fix stage. */
export interface FixStageInput {
  fixes: readonly Fix[];
  body: Buffer;
  prefix: Prefix;
  /** Request headers a fix may read or change (lower-case; today `anthropic-beta`). */
  headers: Readonly<Record<string, string>>;
  /** The state the parent request left; undefined starts fresh (a new conversation or a sibling). */
  states: ReadonlyMap<string, unknown> | undefined;
  context: FixContext;
  /** The parent request's client and forwarded prefixes, for the stability guard. */
  parent?: ForwardedPair;
  reparse: (body: Buffer, headers: Readonly<Record<string, string>>) => Prefix;
  /** `reparse` in bounded steps (for {@link runFixStageSteps}; used instead of `reparse` when given). */
  reparseSteps?: (body: Buffer, headers: Readonly<Record<string, string>>) => Generator<void, Prefix>;
}

/** The outcome, with what the guard decided (absent when it had nothing to compare with). */
export interface FixStageResult extends PipelineResult {
  guard?: {
    /** The fixes alone would have kept less of the parent's cache than the client's own bytes. */
    broke: boolean;
    kept: 'fixed' | 'fresh-state' | 'client-bytes';
    /** Tokens of the parent's prefix the client's own request loses, and the fixed one. */
    clientLost: number;
    forwardedLost: number;
  };
}

/**
 * Runs the fixes. If the fixed request would lose more of the parent's forwarded prefix than the client's
 * own bytes lose of the parent's, it tries the fixes on a fresh state and the client's bytes, and keeps
 * whichever shares the most; the note says why. A fix never makes a conversation write more than without it.
 */
export function runFixStage(input: FixStageInput): FixStageResult {
  return drainSteps(runFixStageSteps(input));
}

/**
 * {@link runFixStage} in bounded steps (its re-parses yield between pieces), for a shell that must not hold
 * its event loop for a huge body. The same stage: `runFixStage` runs it to the end.
 */
export function* runFixStageSteps(input: FixStageInput): Generator<void, FixStageResult> {
  const request = { body: input.body, prefix: input.prefix, headers: input.headers };
  const given = input.reparse;
  const reparse = input.reparseSteps ?? ((b: Buffer, h: Readonly<Record<string, string>>) => at(given(b, h)));
  const fixed = yield* runFixesSteps(input.fixes, request, input.states ?? new Map(), input.context, reparse);
  if (!input.parent) return fixed;
  const check = checkStability(input.parent, { client: input.prefix.blocks, forwarded: fixed.prefix.blocks });
  const guard = {
    broke: check.breaksEarlier,
    clientLost: check.clientLost,
    forwardedLost: check.forwardedLost,
  };
  if (!check.breaksEarlier) return { ...fixed, guard: { kept: 'fixed', ...guard } };
  // A fresh state keeps what the provider refused: a withdrawn fix stays off.
  const fresh = yield* runFixesSteps(
    input.fixes,
    request,
    withdrawalsOnly(input.states),
    input.context,
    reparse,
  );
  const freshShared = sharedPrefixTokens(input.parent.forwarded, fresh.prefix.blocks);
  const clientBytesShared = sharedPrefixTokens(input.parent.forwarded, input.prefix.blocks);
  const best = Math.max(check.forwardedShared, freshShared, clientBytesShared);
  const note = (kept: string, shared: number) =>
    `stability guard: the fixed request would lose ${Math.round(check.forwardedLost)} tokens of the parent's cache, the client's own ${Math.round(check.clientLost)}; forwarded ${kept} (keeps ${Math.round(shared)})`;
  if (best === check.forwardedShared) return { ...fixed, guard: { kept: 'fixed', ...guard } };
  if (best === freshShared && fresh.changed) {
    return {
      ...fresh,
      notes: [
        ...fresh.notes,
        { fix: 'guard', changed: true, notes: [note('the fixes on a fresh state', freshShared)] },
      ],
      guard: { kept: 'fresh-state', ...guard },
    };
  }
  return {
    body: input.body,
    prefix: input.prefix,
    headers: { ...input.headers },
    changed: false,
    states: withdrawalsOnly(input.states),
    changes: [],
    edits: [],
    notes: [{ fix: 'guard', changed: false, notes: [note("the client's bytes", clientBytesShared)] }],
    guard: { kept: 'client-bytes', ...guard },
  };
}
