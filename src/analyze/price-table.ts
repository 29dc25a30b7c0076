// The dated price table: dollars per million tokens by model, each row with the date it was true on and
// its source. A row prices its own id and that id's dated variants; a model with no row of its own is priced
// from its family's nearest row, named as such, or left unpriced (flagged, never priced as zero).

import { CachewardError } from '../core/errors.js';

/** Prices in USD per million tokens. */
export interface PriceRow {
  provider: 'anthropic' | 'openai';
  /** Model id: it matches itself and its dated variants (`claude-opus-4-5-20251101`, `…@20251101`). */
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
  'shared/reference/anthropic/pricing.md (docs/en/about-claude/pricing.md at llms-txt-archive 3ba56f2c, last changed 2026-08-20)';
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

/**
 * A lookup's answer: the row that prices the model. `nearestFor` is set when the model has no row of its
 * own (nor is it a dated variant of one) and this row, its family's nearest, stands in: every place that
 * shows the price says so.
 */
export interface PriceMatch extends PriceRow {
  nearestFor?: string;
}

/**
 * What may follow a row's id in a variant of it: a date (`-20251101`, `@20251101`, `-2026-03-05`) or
 * `-latest`, a platform version (`-v1:0`), Claude Code's `[1m]` (the 1M context, at standard prices).
 */
const VARIANT = /^(?:(?:-\d{8}|@\d{8}|-\d{4}-\d{2}-\d{2}|-latest)(?:-v\d+(?::\d+)?)?)?(?:\[1m\])?$/;

/** `claude-<family>-<major>[-<minor>]`: the family and version of a Claude model id (none for other ids). */
function claudeVersion(id: string): { family: string; version: number[] } | undefined {
  const m = /^claude-([a-z]+)-(\d{1,2}(?:-\d{1,2})*)$/.exec(id);
  if (!m?.[1] || !m[2]) return undefined;
  return { family: m[1], version: m[2].split('-').map(Number) };
}

/** a ≤ b, component by component (a missing component is 0). */
function atOrBelow(a: readonly number[], b: readonly number[]): boolean {
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const x = a[i] ?? 0;
    const y = b[i] ?? 0;
    if (x !== y) return x < y;
  }
  return true;
}

/**
 * Prices by model. A row prices its own id and that id's dated variants (file rows before built-in ones).
 * A Claude model with no row of its own is priced from the nearest row of its family and major version
 * at or below it (`claude-opus-5-5` from `claude-opus-5`, `claude-opus-4-9` from `claude-opus-4-8`, never
 * from Opus 4's), with the fact carried on the answer; any other model is unpriced.
 */
export class PriceTable {
  private readonly rows: PriceRow[];
  constructor(extra: readonly PriceRow[] = [], builtIn: readonly PriceRow[] = BUILT_IN_PRICES) {
    this.rows = [...extra, ...builtIn];
  }

  /** The row for a model id, or undefined when it is not priced (the report flags it). */
  lookup(model: string | undefined): PriceMatch | undefined {
    if (!model) return undefined;
    const id = model.toLowerCase();
    for (const row of this.rows) {
      const m = row.model.toLowerCase();
      if (id === m || (id.startsWith(m) && VARIANT.test(id.slice(m.length)))) return row;
    }
    const near = this.nearest(id);
    return near ? { ...near, nearestFor: model } : undefined;
  }

  /** The nearest row of the model's family and major version at or below it, if any. */
  private nearest(id: string): PriceRow | undefined {
    // A dated variant of a version with no row: its version is the one it is a variant of.
    const want = claudeVersion(id.replace(/(?:-\d{8}|@\d{8}|-latest)(?:-v\d+(?::\d+)?)?$/, ''));
    if (!want) return undefined;
    let best: { row: PriceRow; version: number[] } | undefined;
    for (const row of this.rows) {
      const have = claudeVersion(row.model.toLowerCase());
      if (!have || have.family !== want.family || have.version[0] !== want.version[0]) continue;
      if (!atOrBelow(have.version, want.version)) continue;
      // Higher wins; of equal versions the first (a file row before the built-in one).
      if (!best || !atOrBelow(have.version, best.version)) best = { row, version: have.version };
    }
    return best?.row;
  }

  all(): readonly PriceRow[] {
    return this.rows;
  }
}

/** Says that a price is borrowed: "claude-opus-5-5 has no price row of its own; priced as claude-opus-5 (…)". */
export function nearestPriceNote(p: PriceMatch): string | undefined {
  if (p.nearestFor === undefined) return undefined;
  return `${p.nearestFor} has no price row of its own; priced as ${p.model} (${p.label}, ${p.date}), the nearest row of its family`;
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
