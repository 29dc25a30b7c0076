// Rebuilds the prefix model from a capture record's blocks, so the cache models (which take a Prefix)
// run over captures exactly as they run in the simulator. No body, no text: keys, sizes and markers only.

import type { CapturedPrefix } from '../capture/capture-record.js';
import type { Prefix, PrefixBlock, PrefixLevel } from '../prefix/build-prefix.js';
import { TranscriptChain } from '../prefix/transcript.js';
import type { RequestBody, WireFormat } from '../wire/request-body.js';

const LEVELS: PrefixLevel[] = ['tools', 'system', 'messages'];

/** A Prefix whose blocks come from a capture. `body` is empty: nothing here may read request text. */
export function prefixFromCapture(
  captured: CapturedPrefix,
  model: string | undefined,
  betas: readonly string[] = [],
): Prefix {
  let cumulative = 0;
  const transcript = new TranscriptChain();
  const blocks: PrefixBlock[] = captured.blocks.map((b, i) => {
    cumulative += b.tokens;
    return {
      ...(b.tp ? { toolParts: { schema: b.tp[0], description: b.tp[1], other: b.tp[2] } } : {}),
      transcript: b.level === 'messages' ? transcript.next(b.role, b.id) : undefined,
      index: i,
      level: b.level,
      kind: b.kind,
      name: b.name,
      messageIndex: b.message,
      partIndex: b.part,
      role: b.role,
      contentHash: b.id,
      hash: b.hash,
      tokens: b.tokens,
      cumulativeTokens: cumulative,
      span: { start: b.at, end: b.at + b.size },
      cacheControl: b.cc,
      emptyText: b.empty === true,
    };
  });
  const levels = {} as Record<PrefixLevel, Prefix['levels'][PrefixLevel]>;
  for (const level of LEVELS) {
    let start = blocks.findIndex((b) => b.level === level);
    let end = start;
    if (start < 0) {
      // An empty level sits where the next level starts.
      const after = LEVELS.slice(LEVELS.indexOf(level) + 1)
        .map((l) => blocks.findIndex((b) => b.level === l))
        .find((i) => i >= 0);
      start = after ?? blocks.length;
      end = start;
    } else {
      while (end < blocks.length && blocks[end]?.level === level) end++;
    }
    levels[level] = {
      start,
      end,
      params: captured.params?.[level] ?? {},
      // Captures from before fold hashes were kept: the level's parameters stand in (same level, same params).
      foldHash: captured.folds?.[level] ?? `${level}:${JSON.stringify(captured.params?.[level] ?? {})}`,
    };
  }
  const body = {
    format: captured.format as WireFormat,
    bytes: Buffer.alloc(0),
    units: [],
    fields: {},
    fieldSpans: new Map(),
    betas: [...betas],
    value: () => ({}),
  } as unknown as RequestBody;
  const prefix: Prefix = {
    format: captured.format as WireFormat,
    model,
    blocks,
    levels,
    deferredTools: captured.deferredTools ?? [],
    totalTokens: cumulative,
    body,
  };
  if (captured.auto) prefix.autoCacheControl = captured.auto;
  return prefix;
}
