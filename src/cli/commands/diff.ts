// `cacheward diff A.json B.json`: where two request bodies' cached prefixes diverge, in one sentence.
// A thin shell over firstDivergence; it reads files and prints, nothing more.

import { type Command, Option } from 'commander';
import { PrefixBuilder } from '../../prefix/build-prefix.js';
import { describeComparison, describeDivergence } from '../../prefix/describe-divergence.js';
import { comparePrefixes } from '../../prefix/first-divergence.js';
import type { WireFormat } from '../../wire/request-body.js';
import { EXIT_FINDING, EXIT_OK } from '../exit-codes.js';
import { type CliIO, styles } from '../io.js';
import { readRequestFile } from '../read-request-file.js';

interface DiffOptions {
  json?: boolean;
  format?: WireFormat;
}

export function registerDiff(program: Command, io: CliIO, setExit: (code: number) => void): void {
  program
    .command('diff')
    .description(
      "where two request bodies' cached prefixes diverge (exit 0 if they agree, 1 if they diverge)",
    )
    .argument('<a>', 'the earlier request body (JSON file, or - for stdin)')
    .argument('<b>', 'the later request body (JSON file)')
    .option('--json', 'print the structured result as JSON')
    .addOption(
      new Option('--format <format>', 'the request format (default: from the route, else detected)').choices([
        'anthropic-messages',
        'openai-chat',
        'openai-responses',
      ]),
    )
    .addHelpText(
      'after',
      '\nA file holds a request body, or an exchange {"route", "headers", "body"}; its anthropic-beta\nheader is then part of the comparison.',
    )
    .action(async (a: string, b: string, opts: DiffOptions) => {
      const builder = new PrefixBuilder();
      const read = { ...(opts.format ? { format: opts.format } : {}), stdin: io.stdin };
      const pa = await readRequestFile(a, builder, read);
      const pb = await readRequestFile(b, builder, read);
      const cmp = comparePrefixes(pa, pb);
      if (opts.json) {
        const sentence = cmp.divergence
          ? describeDivergence(cmp.divergence)
          : (describeComparison(cmp)[0] ?? '');
        io.out(JSON.stringify({ identical: cmp.divergence === null, sentence, ...cmp }, null, 2));
      } else {
        const s = styles(io.color);
        const [first, ...rest] = describeComparison(cmp);
        io.out(cmp.divergence ? s.yellow(first ?? '') : s.green(first ?? ''));
        for (const line of rest) io.out(s.dim(line));
      }
      setExit(cmp.divergence ? EXIT_FINDING : EXIT_OK);
    });
}
