// Which notes count as a fix that changed a request: the fixes' own, never the pipeline's, the stability
// guard's or the state's (the report's "fixes applied" and the OTLP attribute both ask this).

import { describe, expect, it } from 'vitest';
import { fixChanged } from './fix-note.js';

describe('fixChanged', () => {
  it("counts a fix's own change, not a refused one, and never the pipeline's, guard's or state's notes", () => {
    expect(fixChanged({ fix: 'tools-freeze', changed: true })).toBe(true);
    expect(fixChanged({ fix: 'tools-freeze', changed: false })).toBe(false);
    for (const fix of ['pipeline', 'guard', 'state']) expect(fixChanged({ fix, changed: true })).toBe(false);
  });
});
