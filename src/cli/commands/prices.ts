// `cacheward prices`: the dated price table report and whatif use, an example --prices file, and its format.
// It prints prices; it never invents one: the example's OpenAI figures are marked as placeholders to replace.

import type { Command } from 'commander';
import { BUILT_IN_PRICES, type PriceRow, PriceTable } from '../../analyze/price-table.js';
import { InputError } from '../../core/errors.js';
import { loadPriceFile } from '../../report/price-file.js';
import { EXIT_OK } from '../exit-codes.js';
import { type CliIO, styles } from '../io.js';

/** The format of a `--prices FILE`, for every command's --help and docs/report.md. */
export const PRICES_HELP = `
Prices: built in for the Anthropic models, each row dated and sourced (\`cacheward prices\` lists them).
--prices FILE adds or overrides rows: a JSON array of objects
  {"provider": "anthropic" | "openai", "model": "<model id prefix>", "label"?: "<name>",
   "input": N, "write5m": N, "write1h": N, "read": N, "output": N,
   "date": "YYYY-MM-DD", "source"?: "<where the figures come from>"}
with every price in US dollars per million tokens. "model" matches an id and its dated variants
(claude-opus-5 matches claude-opus-5-20261101, not claude-opus-5-5), and file rows win over built-in
ones. A Claude model with no row of its own is priced from the nearest row of its family and major
version at or below it (claude-opus-5-5 as claude-opus-5), and the report says so; any other model is
not priced. OpenAI cache writes (GPT-5.6+) are priced at write5m. \`cacheward prices --example\` prints a file.`;

/** An example price file: one real built-in row (as an override) and one OpenAI row of placeholders. */
export function examplePriceFile(): PriceRow[] {
  const opus = BUILT_IN_PRICES.find((r) => r.model === 'claude-opus-5') as PriceRow;
  const input = 1;
  return [
    { ...opus },
    {
      provider: 'openai',
      model: 'gpt-5.6',
      label: 'EXAMPLE ROW: replace these figures',
      input,
      write5m: input * 1.25,
      write1h: input * 1.25,
      read: input * 0.1,
      output: input * 8,
      date: '2026-01-01',
      source:
        'EXAMPLE: put the input and output prices and their date from your price page here; writes 1.25x and reads 0.1x of input are the GPT-5.6+ multipliers of OpenAI prompt caching',
    },
  ];
}

const usd = (v: number) => `$${v.toFixed(v < 1 ? 3 : 2)}`;

export function registerPrices(program: Command, io: CliIO, setExit: (code: number) => void): void {
  program
    .command('prices')
    .description('the dated price table report and whatif use, and the format of --prices FILE')
    .option('--example', 'print an example --prices file (JSON) to start yours from')
    .option('--prices <file>', 'show the table with this file’s rows added (and checked)')
    .option('--json', 'print the table as a --prices file (JSON)')
    .addHelpText('after', PRICES_HELP)
    .action(async (opts: { example?: boolean; prices?: string; json?: boolean }) => {
      if (opts.example) {
        io.out(JSON.stringify(examplePriceFile(), null, 2));
        setExit(EXIT_OK);
        return;
      }
      let extra: PriceRow[] = [];
      if (opts.prices) {
        try {
          extra = await loadPriceFile(opts.prices);
        } catch (err) {
          throw new InputError((err as Error).message);
        }
      }
      const rows = new PriceTable(extra).all();
      if (opts.json) {
        io.out(JSON.stringify(rows, null, 2));
        setExit(EXIT_OK);
        return;
      }
      const s = styles(io.color);
      io.out(s.bold('dollars per million tokens'));
      const table = [
        ['model', 'input', '5m write', '1h write', 'read', 'output', 'date', 'from'],
        ...rows.map((r, i) => [
          r.model,
          usd(r.input),
          usd(r.write5m),
          usd(r.write1h),
          usd(r.read),
          usd(r.output),
          r.date,
          i < extra.length ? (opts.prices ?? '') : 'built in',
        ]),
      ];
      const widths = (table[0] ?? []).map((_, c) => Math.max(...table.map((r) => (r[c] ?? '').length)));
      for (const [i, r] of table.entries()) {
        const line = r
          .map((cell, c) => (c === 0 || c >= 6 ? cell.padEnd(widths[c] ?? 0) : cell.padStart(widths[c] ?? 0)))
          .join('  ')
          .trimEnd();
        io.out(i === 0 ? s.dim(line) : line);
      }
      const sources = [...new Set(rows.map((r) => r.source))];
      io.out('');
      for (const src of sources) io.out(s.dim(`source: ${src}`));
      io.out(
        s.dim(
          'OpenAI rows are not built in (the reference pages carry no per-model prices): add them with --prices FILE.',
        ),
      );
      setExit(EXIT_OK);
    });
}
