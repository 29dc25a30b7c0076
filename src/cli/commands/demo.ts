// `cacheward demo`: the self-contained tour that `npm start` runs. Part one: the prefix diff of bundled
// request pairs, one per bust class. Part two: a scripted agent session through the proxy into the
// simulator, and its report. It needs no network and no API key; it keeps files only when asked.

import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Command } from 'commander';
import { analyzePaths } from '../../analyze/analyze-paths.js';
import { PriceTable } from '../../analyze/price-table.js';
import { bustExamples } from '../../demo/bust-examples.js';
import { runBustSession } from '../../demo/bust-session.js';
import { PrefixBuilder } from '../../prefix/build-prefix.js';
import { describeDivergence, formatCount } from '../../prefix/describe-divergence.js';
import { comparePrefixes } from '../../prefix/first-divergence.js';
import { renderTerminalReport } from '../../report/terminal-report.js';
import { EXIT_FINDING, EXIT_OK } from '../exit-codes.js';
import { type CliIO, styles } from '../io.js';

interface DemoOptions {
  write?: string;
  captures?: string;
}

export function registerDemo(program: Command, io: CliIO, setExit: (code: number) => void): void {
  program
    .command('demo')
    .description(
      'a self-contained tour: where prompt caches break, what it costs, and where they only seem to break',
    )
    .option(
      '--write <dir>',
      'also write each example pair as <dir>/<id>.a.json and .b.json, for `cacheward diff`',
    )
    .option(
      '--captures <dir>',
      "keep the scripted session's captures in <dir> (default: a temporary folder, removed)",
    )
    .action(async (opts: DemoOptions) => {
      const s = styles(io.color);
      const builder = new PrefixBuilder();
      const examples = bustExamples();
      io.out(s.bold('cacheward demo: where the cached prefix breaks, and where it only seems to'));
      io.out('');
      let wrong = 0;
      for (const [i, ex] of examples.entries()) {
        const cmp = comparePrefixes(builder.parse(JSON.stringify(ex.a)), builder.parse(JSON.stringify(ex.b)));
        const d = cmp.divergence;
        io.out(s.bold(`${i + 1}. ${ex.title}`));
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
      const first = examples[0]?.id ?? '';
      io.out(
        opts.write
          ? `wrote ${examples.length} pairs to ${opts.write}; try: cacheward diff ${join(opts.write, `${first}.a.json`)} ${join(opts.write, `${first}.b.json`)}`
          : s.dim(
              'Write the pairs with --write DIR and compare them yourself with `cacheward diff A.json B.json`.',
            ),
      );

      io.out('');
      io.out(
        s.bold(
          'A scripted agent session through `cacheward proxy` into `cacheward sim`, then `cacheward report`:',
        ),
      );
      const dir = opts.captures ?? (await mkdtemp(join(tmpdir(), 'cacheward-demo-')));
      try {
        const run = await runBustSession(dir);
        for (const step of run.steps) io.out(s.dim(`  ${step.session.padEnd(12)} ${step.label}`));
        io.out('');
        const result = await analyzePaths([dir], { prices: new PriceTable() });
        for (const line of renderTerminalReport(result, s, 20)) io.out(line);
        if (opts.captures)
          io.out(s.dim(`\nThe captures are in ${dir}: try cacheward report ${dir} --html report.html`));
      } finally {
        if (!opts.captures) await rm(dir, { recursive: true, force: true });
      }
      setExit(wrong ? EXIT_FINDING : EXIT_OK);
    });
}
