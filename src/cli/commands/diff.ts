// `cacheward diff A B`: where two request bodies' cached prefixes diverge, in one sentence. A and B are
// files or capture record ids. A thin shell over firstDivergence; it reads and prints, nothing more.

import { existsSync } from 'node:fs';
import { type Command, Option } from 'commander';
import { type Prefix, PrefixBuilder } from '../../prefix/build-prefix.js';
import { describeComparison, describeDivergence } from '../../prefix/describe-divergence.js';
import { comparePrefixes } from '../../prefix/first-divergence.js';
import type { WireFormat } from '../../wire/request-body.js';
import { EXIT_FINDING, EXIT_OK } from '../exit-codes.js';
import { findRecord, RECORD_ID, recordBody, recordSearchPaths } from '../find-record.js';
import { type CliIO, styles } from '../io.js';
import { parseRequestBytes, type ReadRequestOptions, readRequestFile } from '../read-request-file.js';

interface DiffOptions {
  json?: boolean;
  format?: WireFormat;
  dir?: string;
  client?: boolean;
}

/** A file, `-`, or a capture record id (looked up with --dir): its prefix. */
async function readSide(
  arg: string,
  builder: PrefixBuilder,
  read: ReadRequestOptions,
  opts: DiffOptions,
): Promise<Prefix> {
  if (arg === '-' || !RECORD_ID.test(arg) || existsSync(arg)) return readRequestFile(arg, builder, read);
  const found = await findRecord(arg, recordSearchPaths(opts.dir));
  const beta = found.record.headers['anthropic-beta'];
  return parseRequestBytes(recordBody(found, Boolean(opts.client)), arg, builder, read, {
    route: found.record.route,
    ...(beta ? { headers: { 'anthropic-beta': beta } } : {}),
  });
}

export function registerDiff(program: Command, io: CliIO, setExit: (code: number) => void): void {
  program
    .command('diff')
    .description(
      "where two request bodies' cached prefixes diverge (exit 0 if they agree, 1 if they diverge)",
    )
    .argument('<a>', 'the earlier request: a JSON file, - for stdin, or a capture record id (cw_…)')
    .argument('<b>', 'the later request: a JSON file or a capture record id')
    .option('--json', 'print the structured result as JSON')
    .addOption(
      new Option('--format <format>', 'the request format (default: from the route, else detected)').choices([
        'anthropic-messages',
        'openai-chat',
        'openai-responses',
      ]),
    )
    .option(
      '--dir <path>',
      'capture folder or file to find record ids in (default: the proxy’s capture folder)',
    )
    .option('--client', 'for record ids: the bytes the client sent, when a fix changed what went upstream')
    .addHelpText(
      'after',
      '\nA file holds a request body, or an exchange {"route", "headers", "body"}; its anthropic-beta\nheader is then part of the comparison. A record id (full-mode captures) brings its route and betas.',
    )
    .action(async (a: string, b: string, opts: DiffOptions) => {
      const builder = new PrefixBuilder();
      const read = { ...(opts.format ? { format: opts.format } : {}), stdin: io.stdin };
      const pa = await readSide(a, builder, read, opts);
      const pb = await readSide(b, builder, read, opts);
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
