// The dated price table: dollars per million tokens by model, each row with the date it was true on and
// its source. Unknown models are flagged, never priced as zero. Users add or override rows from a file.

import { CachewardError } from '../core/errors.js';

/** Prices in USD per million tokens. */
export interface PriceRow {
  provider: 'anthropic' | 'openai';
  /** Model id prefix: `claude-opus-4-5` matches `claude-opus-4-5-20251101`. */
  model: string;
  label: string;
  input: number;
  write5m: number;
  write1h: number;
  /** Cache reads (Anthropic "cache hits & refreshes", OpenAI cached input). */
  read: number;
  output: number;
  /** The date the row was true on, and where it comes from. */
  date: string;
  source: string;
}

const ANTHROPIC_SOURCE =
  'shared/reference/anthropic/pricing.md (docs/en/about-claude/pricing.md, last changed 2026-08-20)';
const A = (model: string, label: string, input: number, output: number): PriceRow => ({
  provider: 'anthropic',
  model,
  label,
  input,
  write5m: input * 1.25,
  write1h: input * 2,
  read: input * 0.1,
  output,
  date: '2026-08-20',
  source: ANTHROPIC_SOURCE,
});

/**
 * Built-in rows. Anthropic: the model pricing table of the reference copy (5m writes 1.25x, 1h writes 2x,
 * reads 0.1x of input, as listed there). OpenAI: the reference copies give only the GPT-5.6+ multipliers
 * (writes 1.25x, reads 0.1x of input), no per-model prices, so no OpenAI row is built in: add yours with
 * `--prices FILE` and its date.
 */
export const BUILT_IN_PRICES: readonly PriceRow[] = [
  A('claude-fable-5', 'Claude Fable 5', 10, 50),
  A('claude-mythos-5', 'Claude Mythos 5', 10, 50),
  A('claude-opus-5', 'Claude Opus 5', 5, 25),
  A('claude-opus-4-8', 'Claude Opus 4.8', 5, 25),
  A('claude-opus-4-7', 'Claude Opus 4.7', 5, 25),
  A('claude-opus-4-6', 'Claude Opus 4.6', 5, 25),
  A('claude-opus-4-5', 'Claude Opus 4.5', 5, 25),
  A('claude-opus-4-1', 'Claude Opus 4.1', 15, 75),
  A('claude-opus-4', 'Claude Opus 4', 15, 75),
  A('claude-sonnet-5', 'Claude Sonnet 5', 2, 10),
  A('claude-sonnet-4-6', 'Claude Sonnet 4.6', 3, 15),
  A('claude-sonnet-4-5', 'Claude Sonnet 4.5', 3, 15),
  A('claude-sonnet-4', 'Claude Sonnet 4', 3, 15),
  A('claude-haiku-4-5', 'Claude Haiku 4.5', 1, 5),
  A('claude-3-5-haiku', 'Claude Haiku 3.5', 0.8, 4),
];

/** A price file that cannot be used. */
export class PriceFileError extends CachewardError {
  constructor(message: string) {
    super('CW_PRICE_FILE', message);
  }
}

/** Prices by model; the longest matching prefix wins, and user rows come before built-in ones. */
export class PriceTable {
  private readonly rows: PriceRow[];
  constructor(extra: readonly PriceRow[] = [], builtIn: readonly PriceRow[] = BUILT_IN_PRICES) {
    this.rows = [...extra, ...builtIn];
  }

  /** The row for a model id, or undefined when it is not priced (the report flags it). */
  lookup(model: string | undefined): PriceRow | undefined {
    if (!model) return undefined;
    const id = model.toLowerCase();
    let best: PriceRow | undefined;
    for (const row of this.rows) {
      const m = row.model.toLowerCase();
      if (
        (id === m || id.startsWith(`${m}-`) || id.startsWith(`${m}.`) || id.startsWith(`${m}@`)) &&
        (!best || m.length > best.model.length)
      ) {
        best = row;
      }
    }
    return best;
  }

  all(): readonly PriceRow[] {
    return this.rows;
  }
}

const FIELDS = ['input', 'write5m', 'write1h', 'read', 'output'] as const;

/**
 * Checks a parsed price list (`--prices FILE`): a JSON array of rows (provider, model, input, write5m,
 * write1h, read, output, date, source). `path` names it in errors and is each row's default source.
 */
export function parsePriceRows(value: unknown, path: string): PriceRow[] {
  if (!Array.isArray(value)) throw new PriceFileError(`${path}: expected a JSON array of price rows`);
  return value.map((row, i) => {
    const r = row as Record<string, unknown>;
    const at = `${path}: [${i}]`;
    if (r.provider !== 'anthropic' && r.provider !== 'openai')
      throw new PriceFileError(`${at}.provider: "anthropic" or "openai"`);
    if (typeof r.model !== 'string' || !r.model) throw new PriceFileError(`${at}.model: a model id prefix`);
    for (const f of FIELDS) {
      if (typeof r[f] !== 'number' || (r[f] as number) < 0)
        throw new PriceFileError(`${at}.${f}: dollars per million tokens`);
    }
    if (typeof r.date !== 'string' || !/^\d{4}-\d{2}-\d{2}$/.test(r.date))
      throw new PriceFileError(`${at}.date: YYYY-MM-DD, the day the price was true`);
    return {
      provider: r.provider,
      model: r.model,
      label: typeof r.label === 'string' ? r.label : r.model,
      input: r.input as number,
      write5m: r.write5m as number,
      write1h: r.write1h as number,
      read: r.read as number,
      output: r.output as number,
      date: r.date,
      source: typeof r.source === 'string' ? r.source : path,
    };
  });
}
