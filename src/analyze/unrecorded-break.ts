// Where a provider's read ended when the request's source did not record all of the prefix, and which causes
// could have broken it there. A fact about what is known: it never names one cause where several fit. Pure.

import type { UnrecordedPart } from '../record/capture-record.js';
import type { BustCause } from './bust-cause.js';

/** The break, located by the tokens the provider read. */
export interface UnrecordedBreak {
  /** What the source did not record. */
  parts: UnrecordedPart[];
  /** The read ended inside the unrecorded parts; else in the recorded messages after them. */
  inside: boolean;
  /** The causes that fit and that the source cannot tell apart, in the closed vocabulary. */
  couldBe: BustCause[];
}

const BY_PART: Record<UnrecordedPart, BustCause> = {
  tools: 'tools_changed',
  system: 'system_changed',
  params: 'params_changed',
  injected: 'messages_edited',
};

/**
 * Locates the break: `read` (what the provider read) against `tokens` (where the block standing for the
 * unrecorded parts ends), both in the prefix model's estimates. Inside it, any unrecorded part may have
 * changed; past it, in messages the source recorded unchanged, only parameters folded at the messages level
 * or content the client adds there could have, or nothing the source can see.
 */
export function locateBreak(parts: readonly UnrecordedPart[], tokens: number, read: number): UnrecordedBreak {
  const inside = read < tokens - Math.max(16, tokens * 0.02);
  const fit: BustCause[] = inside
    ? parts.map((p) => BY_PART[p])
    : [
        ...(parts.includes('params') ? (['params_changed'] as const) : []),
        ...(parts.includes('injected') ? (['messages_edited'] as const) : []),
        'unexplained',
      ];
  return { parts: [...parts], inside, couldBe: [...new Set(fit)] };
}
