// A metric label stays bounded: known names are canonical, a few unknown ones pass, the rest are `other`.
// In-process: no collector, no exporter.

import { describe, expect, it } from 'vitest';
import { PriceTable } from '../analyze/price-table.js';
import { BoundedLabel } from './bounded-labels.js';

describe('BoundedLabel', () => {
  it('keeps priced models as the price table names them and folds unknown models past the slots into other', () => {
    const prices = new PriceTable();
    const label = new BoundedLabel((m) => prices.lookup(m)?.model, 3);
    expect(label.of('claude-opus-5')).toBe(prices.lookup('claude-opus-5')?.model);
    const unknown = Array.from({ length: 50 }, (_, i) => label.of(`made-up-model-${i}`));
    expect(new Set(unknown)).toEqual(
      new Set(['made-up-model-0', 'made-up-model-1', 'made-up-model-2', 'other']),
    );
    expect(label.of('made-up-model-1')).toBe('made-up-model-1');
    expect(label.of(undefined)).toBe('unknown');
    // Known names never use up a slot.
    for (let i = 0; i < 10; i++) expect(label.of('claude-opus-5')).not.toBe('other');
  });
});
