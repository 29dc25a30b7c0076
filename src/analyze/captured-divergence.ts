// Where a captured request stops sharing an earlier one's prefix, and what changed there, from captured
// blocks alone (keys, identities, tool names, folded parameters). The analyzer's view of firstDivergence.

import type { CapturedBlock, CapturedPrefix } from '../capture/capture-record.js';
import { stableJson } from '../prefix/stable-json.js';

/** What changed, in the closed vocabulary's terms, with its detail. */
export type CapturedChange =
  | { level: 'model'; before: string | undefined; after: string | undefined }
  | {
      level: 'params';
      invalidates: 'tools' | 'system' | 'messages';
      params: Array<{ name: string; before: unknown; after: unknown }>;
    }
  | {
      level: 'tools';
      index: number;
      added: Array<{ name: string; index: number }>;
      removed: Array<{ name: string; index: number }>;
      reordered: Array<{ index: number; moved: string; displaced: string }>;
      changed: string[];
    }
  | { level: 'system'; block: number }
  | {
      level: 'messages';
      message: number;
      block: number;
      edit: 'edited' | 'inserted' | 'removed' | 'restructured';
    };

export interface CapturedDivergence {
  /** Index of the first block whose key differs (in the later request). */
  index: number;
  /** Estimated tokens the two share before it. */
  sharedTokens: number;
  /** Byte offset of that block in the later request's body (absent when it has none). */
  byteOffset?: number;
  change: CapturedChange;
}

function tokensBefore(blocks: readonly CapturedBlock[], index: number): number {
  let t = 0;
  for (let i = 0; i < index && i < blocks.length; i++) t += (blocks[i] as CapturedBlock).tokens;
  return t;
}

/** The first divergence of `b` from `a`, or null when one is a prefix of the other. */
export function capturedDivergence(
  a: CapturedPrefix,
  aModel: string | undefined,
  b: CapturedPrefix,
  bModel: string | undefined,
): CapturedDivergence | null {
  if (aModel !== bModel)
    return { index: 0, sharedTokens: 0, change: { level: 'model', before: aModel, after: bModel } };
  const A = a.blocks;
  const B = b.blocks;
  const n = Math.min(A.length, B.length);
  let i = 0;
  while (i < n && (A[i] as CapturedBlock).hash === (B[i] as CapturedBlock).hash) i++;
  const levelStart = (blocks: readonly CapturedBlock[], level: string, fallback: number) => {
    const k = blocks.findIndex((x) => x.level === level);
    return k < 0 ? fallback : k;
  };
  if (i === n) {
    // One is a prefix of the other; tools and system must have ended at the same place to count as shared.
    const ta = A.filter((x) => x.level !== 'messages').length;
    const tb = B.filter((x) => x.level !== 'messages').length;
    if (ta === tb) {
      const pb = paramsChange(a, b, 'messages', levelStart(B, 'messages', B.length));
      return pb ?? null;
    }
  }
  const at = B[i] ?? A[i];
  const level = (at?.level ?? 'messages') as 'tools' | 'system' | 'messages';
  // A folded parameter that changed at this level's start explains the break better than the block.
  for (const l of ['tools', 'system', 'messages'] as const) {
    const start = levelStart(B, l, B.length);
    if (start <= i) {
      const p = paramsChange(a, b, l, start);
      if (p) return p;
    }
  }
  const base = {
    index: i,
    sharedTokens: tokensBefore(B, i),
    ...(B[i] ? { byteOffset: (B[i] as CapturedBlock).at } : {}),
  };
  if (level === 'tools') return { ...base, change: toolsChange(A, B, i) };
  if (level === 'system') return { ...base, change: { level: 'system', block: (B[i] ?? A[i])?.part ?? 0 } };
  return { ...base, change: messagesChange(A, B, i) };
}

function paramsChange(
  a: CapturedPrefix,
  b: CapturedPrefix,
  level: 'tools' | 'system' | 'messages',
  start: number,
): CapturedDivergence | null {
  const pa = a.params?.[level] ?? {};
  const pb = b.params?.[level] ?? {};
  const names = new Set([...Object.keys(pa), ...Object.keys(pb)]);
  const params: Array<{ name: string; before: unknown; after: unknown }> = [];
  for (const name of names) {
    if (stableJson(pa[name]) !== stableJson(pb[name]))
      params.push({ name, before: pa[name], after: pb[name] });
  }
  if (!params.length) return null;
  return {
    index: start,
    sharedTokens: tokensBefore(b.blocks, start),
    change: { level: 'params', invalidates: level, params },
  };
}

function toolsChange(
  A: readonly CapturedBlock[],
  B: readonly CapturedBlock[],
  index: number,
): CapturedChange {
  const ta = A.filter((x) => x.level === 'tools');
  const tb = B.filter((x) => x.level === 'tools');
  const name = (x: CapturedBlock, k: number) => x.name ?? `#${k}`;
  const inA = new Map(ta.map((x, k) => [name(x, k), x]));
  const inB = new Map(tb.map((x, k) => [name(x, k), x]));
  const sharedA = ta.map(name).filter((n) => inB.has(n));
  const sharedB = tb.map(name).filter((n) => inA.has(n));
  const reordered: Array<{ index: number; moved: string; displaced: string }> = [];
  for (let k = 0; k < sharedB.length; k++) {
    if (sharedA[k] !== sharedB[k]) {
      reordered.push({
        index: tb.map(name).indexOf(sharedB[k] as string),
        moved: sharedB[k] as string,
        displaced: sharedA[k] as string,
      });
      break;
    }
  }
  return {
    level: 'tools',
    index,
    added: tb.map((x, k) => ({ name: name(x, k), index: k })).filter((t) => !inA.has(t.name)),
    removed: ta.map((x, k) => ({ name: name(x, k), index: k })).filter((t) => !inB.has(t.name)),
    reordered,
    changed: sharedB.filter((n) => inA.get(n)?.id !== inB.get(n)?.id),
  };
}

function messagesChange(A: readonly CapturedBlock[], B: readonly CapturedBlock[], i: number): CapturedChange {
  const x = A[i];
  const y = B[i];
  const where = (blk: CapturedBlock | undefined) => ({ message: blk?.message ?? 0, block: blk?.part ?? 0 });
  if (!y) return { level: 'messages', ...where(x), edit: 'removed' };
  if (!x) return { level: 'messages', ...where(y), edit: 'inserted' };
  if (x.id === y.id) return { level: 'messages', ...where(y), edit: 'restructured' };
  for (let k = 1; k <= 64 && i + k < B.length; k++)
    if ((B[i + k] as CapturedBlock).id === x.id) return { level: 'messages', ...where(y), edit: 'inserted' };
  for (let k = 1; k <= 64 && i + k < A.length; k++)
    if ((A[i + k] as CapturedBlock).id === y.id) return { level: 'messages', ...where(x), edit: 'removed' };
  return { level: 'messages', ...where(y), edit: 'edited' };
}
