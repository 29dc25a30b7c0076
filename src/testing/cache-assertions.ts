// Assertions on cache behaviour for an agent author's own test suite, answered by the report's models:
// a request read (at least) this share of what its parent had cached; else the error names the first
// divergence and the cause. They never compute a cause or a divergence of their own.

import { prefixFromCapture } from '../analyze/captured-prefix.js';
import { describeMiss } from '../analyze/describe-miss.js';
import { CachewardError } from '../core/errors.js';
import { describeDivergence, formatCount } from '../prefix/describe-divergence.js';
import { firstDivergence } from '../prefix/first-divergence.js';
import type { CacheTestbed, TestbedRequest } from './cache-testbed.js';

/** A cache assertion that did not hold. The message says what was read, what broke and what it cost. */
export class CacheAssertionError extends CachewardError {
  constructor(message: string) {
    super('CW_CACHE_ASSERTION', message);
  }
}

/** Options for {@link assertReadsParent}. */
export interface ReadsParentOptions {
  /** The least share of the parent's cached prefix the request must read (default 0.95). */
  atLeast?: number;
  /** The request to check (default the latest). */
  request?: TestbedRequest;
}

/**
 * Asserts that a request read at least `atLeast` of what its parent (the request the conversation model
 * compares it with: the previous turn, or the request a fork branched from) had cached once it was done.
 * Returns the share read.
 */
export function assertReadsParent(bed: CacheTestbed, options: ReadsParentOptions = {}): number {
  const atLeast = options.atLeast ?? 0.95;
  const request = options.request ?? bed.last();
  const all = bed.requests();
  const parent = all.find((r) => r.id === request.parent);
  if (!parent)
    throw new CacheAssertionError(
      `request ${request.id} (${request.relation}) has no parent: it shares no history with an earlier request, so there was nothing cached to read`,
    );
  const cached = parent.cachedAfter ?? 0;
  if (cached <= 0)
    throw new CacheAssertionError(
      `the parent ${parent.id} cached nothing (below the model's minimum, or no breakpoint): nothing to read`,
    );
  const read = request.usage?.cacheRead ?? 0;
  const share = read / cached;
  if (share + 1e-9 >= atLeast) return share;
  const lines = [
    `request ${request.id} read ${formatCount(read)} of the ${formatCount(cached)} tokens its parent ${parent.id} cached (${(share * 100).toFixed(1)}%; wanted at least ${(atLeast * 100).toFixed(1)}%)`,
  ];
  const a = parent.record.prefix;
  const b = request.record.prefix;
  const d =
    a && b ? firstDivergence(prefixFromCapture(a, parent.model), prefixFromCapture(b, request.model)) : null;
  // Where a miss was named, its cause line says what was re-written in the provider's tokens: the
  // divergence's own figure (estimated) would be a second, different count.
  if (d) lines.push(`  first divergence: ${describeDivergence(d, !request.miss)}`);
  if (request.miss) lines.push(`  cause: ${request.miss.cause}: ${describeMiss(request.miss)}`);
  throw new CacheAssertionError(lines.join('\n'));
}
