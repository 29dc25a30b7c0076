// Every error code in the union is documented in docs/errors.md, and every documented code is in the union.
// In-process: it reads docs/errors.md and writes nothing.

import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

describe('error codes', () => {
  it('docs/errors.md lists exactly the codes of ErrorCode', () => {
    const source = readFileSync(new URL('./errors.ts', import.meta.url), 'utf8');
    const union = source.slice(
      source.indexOf('export type ErrorCode'),
      source.indexOf(';', source.indexOf('export type ErrorCode')),
    );
    const codes = [...union.matchAll(/'(CW_[A-Z_]+)'/g)].map((m) => m[1]).sort();
    const doc = readFileSync(new URL('../../docs/errors.md', import.meta.url), 'utf8');
    const documented = [...doc.matchAll(/^\| `(CW_[A-Z_]+)` \|/gm)].map((m) => m[1]).sort();
    expect(documented).toEqual(codes);
    expect(codes.length).toBeGreaterThan(20);
  });
});
