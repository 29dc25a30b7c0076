// The opaque block that stands for what a transcript does not record: its identity names the parts it stands
// for and the scope that shares them (one agent's line in one session), never any content. Pure.

import { UNRECORDED_KIND, type UnrecordedPart } from '../record/capture-record.js';

/** The block's JSON: a system block (Anthropic) or an input item (Responses), optionally with a marker. */
export function unrecordedBlock(parts: readonly UnrecordedPart[], scope: string, marker?: unknown): string {
  const block: Record<string, unknown> = { type: UNRECORDED_KIND, parts: parts.join(','), scope };
  if (marker !== undefined) block.cache_control = marker;
  return JSON.stringify(block);
}
