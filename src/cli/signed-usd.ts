// Dollar differences with the sign in front of the currency: `-$0.0050`, `+$1.20`, never `$-0.0050`.
// Only formatting: the amounts come from the analyzer and whatif.

import { formatUsd } from '../analyze/describe-miss.js';

export function signedUsd(v: number | null): string {
  if (v === null) return formatUsd(v);
  if (v === 0) return formatUsd(0);
  return `${v < 0 ? '-' : '+'}${formatUsd(Math.abs(v))}`;
}
