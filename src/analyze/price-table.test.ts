// The price table's matching: a row prices its id and that id's dated variants; a Claude model with no row
// of its own is priced from its family's nearest row at or below it, named; anything else is unpriced.

import { describe, expect, it } from 'vitest';
import { runSummary } from '../cli/run-summary.js';
import { nearestPrices } from '../report/terminal-report.js';
import type { AnalysisResult } from './analyze-captures.js';
import { BUILT_IN_PRICES, nearestPriceNote, type PriceRow, PriceTable } from './price-table.js';

const table = new PriceTable();
const plain = { bold: String, dim: String, yellow: String, green: String };

describe('PriceTable', () => {
  it('prices a row’s own id and its dated variants from the row, saying nothing more', () => {
    for (const [id, row] of [
      ['claude-opus-5', 'claude-opus-5'],
      ['claude-opus-5-20261101', 'claude-opus-5'],
      ['claude-haiku-4-5@20251001', 'claude-haiku-4-5'],
      ['claude-haiku-4-5-20251001-v1:0', 'claude-haiku-4-5'],
      ['claude-3-5-haiku-latest', 'claude-3-5-haiku'],
      ['claude-opus-4-20250514', 'claude-opus-4'],
      ['claude-opus-4-8[1m]', 'claude-opus-4-8'],
    ] as const) {
      const p = table.lookup(id);
      expect(p?.model, id).toBe(row);
      expect(p?.nearestFor, id).toBeUndefined();
      expect(nearestPriceNote(p as PriceRow), id).toBeUndefined();
    }
  });

  it('prices a Claude model with no row of its own from the nearest row of its family and major version', () => {
    // Claude Code's default model: Opus 5's row, said as such.
    const opus55 = table.lookup('claude-opus-5-5');
    expect(opus55).toMatchObject({ model: 'claude-opus-5', input: 5, nearestFor: 'claude-opus-5-5' });
    expect(nearestPriceNote(opus55 as PriceRow)).toBe(
      'claude-opus-5-5 has no price row of its own; priced as claude-opus-5 (Claude Opus 5, 2026-08-20), the nearest row of its family',
    );
    // Opus 4.8's $5, never Opus 4's $15.
    expect(table.lookup('claude-opus-4-9')).toMatchObject({ model: 'claude-opus-4-8', input: 5 });
    expect(table.lookup('claude-sonnet-4-7-20270101')).toMatchObject({
      model: 'claude-sonnet-4-6',
      nearestFor: 'claude-sonnet-4-7-20270101',
    });
  });

  it('leaves unpriced what has no row and no family row at or below it in its major version', () => {
    for (const id of ['claude-haiku-5', 'gpt-5.6', 'gpt-5.6-mini', 'claude-3-7-sonnet', 'mystery']) {
      expect(table.lookup(id), id).toBeUndefined();
    }
    // A file row prices its own id (and wins over the built-in one); a variant that is not a date does not match it.
    const file: PriceRow = {
      ...(BUILT_IN_PRICES[2] as PriceRow),
      model: 'gpt-5.6',
      provider: 'openai',
      input: 1,
    };
    const withFile = new PriceTable([file]);
    expect(withFile.lookup('gpt-5.6-2026-05-01')?.model).toBe('gpt-5.6');
    expect(withFile.lookup('gpt-5.6-mini')).toBeUndefined();
    const own = new PriceTable([{ ...(BUILT_IN_PRICES[2] as PriceRow), model: 'claude-opus-5-5', input: 7 }]);
    expect(own.lookup('claude-opus-5-5')).toMatchObject({ model: 'claude-opus-5-5', input: 7 });
    expect(own.lookup('claude-opus-5-5')?.nearestFor).toBeUndefined();
  });

  it('says a borrowed price in the report and the run summary', () => {
    const result = {
      generatedFrom: { records: 2, files: 1, skippedLines: 0 },
      totals: {
        requests: 2,
        sessions: 1,
        hitRate: 0.5,
        cost: 1,
        waste: 0,
        unpricedModels: [],
        unpricedRequests: 0,
      },
      byCause: [],
      misses: [],
      prices: [
        { model: 'claude-opus-5', label: 'Claude Opus 5', date: '2026-08-20', source: 's' },
        {
          model: 'claude-opus-5-5',
          label: 'Claude Opus 5',
          date: '2026-08-20',
          source: 's',
          pricedAs: 'claude-opus-5',
        },
      ],
    } as unknown as AnalysisResult;
    const line =
      'priced from the nearest row (no row of their own): claude-opus-5-5 as claude-opus-5 (Claude Opus 5, 2026-08-20)';
    expect(nearestPrices(result)).toBe(line);
    expect(runSummary(result, ['cacheward', 'report', 'x'], plain)).toContain(`  ${line}`);
    expect(nearestPrices({ prices: [] })).toBeUndefined();
  });
});
