// `cacheward demo`: the self-contained tour that `npm start` runs. Today: the prefix diff of bundled
// request pairs, one per bust class. It needs no network and no API key, and writes only with --write.

import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Command } from 'commander';
import { bustExamples } from '../../demo/bust-examples.js';
import { PrefixBuilder } from '../../prefix/build-prefix.js';
import { describeDivergence, formatCount } from '../../prefix/describe-divergence.js';
import { comparePrefixes } from '../../prefix/first-divergence.js';
import { EXIT_FINDING, EXIT_OK } from '../exit-codes.js';
import { type CliIO, styles } from '../io.js';

interface DemoOptions {
  write?: string;
}

export function registerDemo(program: Command, io: CliIO, setExit: (code: number) => void): void {
  program
    .command('demo')
    .description('a self-contained tour: where prompt caches break, and where they only seem to')
    .option(
      '--write <dir>',
      'also write each example pair as <dir>/<id>.a.json and .b.json, for `cacheward diff`',
    )
    .action(async (opts: DemoOptions) => {
      const s = styles(io.color);
      const builder = new PrefixBuilder();
      const examples = bustExamples();
      io.out(s.bold('cacheward demo: where the cached prefix breaks, and where it only seems to'));
      io.out('');
      let wrong = 0;
      for (const [i, ex] of examples.entries()) {
        const a = JSON.stringify(ex.a);
        const b = JSON.stringify(ex.b);
        const cmp = comparePrefixes(builder.parse(a), builder.parse(b));
        const d = cmp.divergence;
        io.out(`${s.bold(`${i + 1}. ${ex.title}`)}`);
        io.out(s.dim(`   seen in: ${ex.source}`));
        if (d) io.out(`   ${s.yellow('bust:')} ${describeDivergence(d)}`);
        else
          io.out(
            `   ${s.green('no bust:')} all ${formatCount(cmp.sharedTokens)} tokens of the earlier request stay cached`,
          );
        if ((d ? 'diverges' : 'agrees') !== ex.expect) {
          wrong++;
          io.out(s.red(`   expected this pair to ${ex.expect === 'agrees' ? 'agree' : 'diverge'}`));
        }
        io.out('');
        if (opts.write) {
          await mkdir(opts.write, { recursive: true });
          await writeFile(join(opts.write, `${ex.id}.a.json`), `${JSON.stringify(ex.a, null, 2)}\n`);
          await writeFile(join(opts.write, `${ex.id}.b.json`), `${JSON.stringify(ex.b, null, 2)}\n`);
        }
      }
      if (opts.write)
        io.out(
          `wrote ${examples.length} pairs to ${opts.write}; try: cacheward diff ${join(opts.write, `${examples[0]?.id}.a.json`)} ${join(opts.write, `${examples[0]?.id}.b.json`)}`,
        );
      else
        io.out(
          s.dim(
            'Write the pairs with --write DIR and compare them yourself with `cacheward diff A.json B.json`.',
          ),
        );
      setExit(wrong ? EXIT_FINDING : EXIT_OK);
    });
}
