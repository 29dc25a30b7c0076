// Every error code in the union is documented in docs/errors.md, and every documented code is in the union;
// an error told in one line names its code once. In-process: it reads docs/errors.md and writes nothing.

import { mkdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CachewardError, errorLine } from './errors.js';

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

describe('errorLine', () => {
  it("names a system error's code once (its message already begins with it)", () => {
    let err: unknown;
    try {
      // A folder where a file is: mkdir fails with EEXIST, whose message starts `EEXIST: `.
      mkdirSync(new URL('./errors.ts', import.meta.url));
    } catch (e) {
      err = e;
    }
    expect((err as NodeJS.ErrnoException).code).toBe('EEXIST');
    expect(errorLine(err)).toMatch(/^EEXIST: file already exists, mkdir /);
  });

  it('adds the code to a message that lacks it, and tells a non-error as a string', () => {
    const bare = Object.assign(new Error('short write'), { code: 'EIO' });
    expect(errorLine(bare)).toBe('EIO: short write');
    expect(errorLine(new CachewardError('CW_CAPTURE_WRITE', 'short write (1 of 2 bytes)'))).toBe(
      'CW_CAPTURE_WRITE: short write (1 of 2 bytes)',
    );
    expect(errorLine('plain')).toBe('plain');
  });
});
