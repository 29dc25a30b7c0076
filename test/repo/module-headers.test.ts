// Every module of src/ opens with its two-line comment: what it is for, and what it must never do.
// Reads the source files only.

import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

function modules(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return modules(path);
    return e.name.endsWith('.ts') && !e.name.endsWith('.test.ts') ? [path] : [];
  });
}

describe('module headers', () => {
  it('every module in src/ starts with at least two comment lines (after a shebang)', () => {
    const files = modules('src');
    expect(files.length).toBeGreaterThan(200);
    const without = files.filter((file) => {
      const lines = readFileSync(file, 'utf8').split('\n');
      const start = lines[0]?.startsWith('#!') ? 1 : 0;
      return !(lines[start]?.startsWith('// ') && lines[start + 1]?.startsWith('//'));
    });
    expect(without).toEqual([]);
  });
});
