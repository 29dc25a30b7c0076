// `cacheward demo`: the self-contained tour that `npm start` runs. Part one: the prefix diff of bundled
// request pairs, one per bust class. Part two: a scripted agent session through the proxy into the
// simulator, and its report. It needs no network and no API key; it keeps files only when asked.

import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Command } from 'commander';
import type { AnalysisResult } from '../../analyze/analyze-captures.js';
import { formatUsd } from '../../analyze/describe-miss.js';
import { PriceTable } from '../../analyze/price-table.js';
import { InputError } from '../../core/errors.js';
import { bustExamples } from '../../demo/bust-examples.js';
import { runBustSession } from '../../demo/bust-session.js';
import { compareReviewForks } from '../../demo/review-fork-demo.js';
import { PrefixBuilder } from '../../prefix/build-prefix.js';
import { describeDivergence, formatCount } from '../../prefix/describe-divergence.js';
import { comparePrefixes } from '../../prefix/first-divergence.js';
import { analyzePaths } from '../../report/analyze-paths.js';
import { renderTerminalReport } from '../../report/terminal-report.js';
import { EXIT_FINDING, EXIT_OK } from '../exit-codes.js';
import { refuseFileAsFolder } from '../folder-option.js';
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
      if (opts.write) await writableFolder('--write', opts.write);
      // Captures go in folders only their owner can read, as the proxy's do.
      if (opts.captures) await writableFolder('--captures', opts.captures, 0o700);
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
        const width = Math.max(...run.steps.map((step) => step.session.length));
        for (const step of run.steps) io.out(s.dim(`  ${step.session.padEnd(width)} ${step.label}`));
        io.out('');
        const result = await analyzePaths([dir], { prices: new PriceTable() });
        for (const line of renderTerminalReport(result, s, 20)) io.out(line);
        if (opts.captures) {
          io.out(s.dim(`\nThe captures are in ${dir}: try cacheward report ${dir} --html report.html`));
        }

        // Part three: the same session with the fixes on, the two reports side by side.
        const fixes = ['tools-freeze', 'pin-reminders'];
        const fixedDir = await mkdtemp(join(tmpdir(), 'cacheward-demo-fixed-'));
        try {
          await runBustSession(fixedDir, undefined, fixes);
          const fixed = await analyzePaths([fixedDir], { prices: new PriceTable() });
          io.out('');
          io.out(
            s.bold(`The same session through \`cacheward proxy --fix ${fixes.join(',')}\`, side by side:`),
          );
          for (const line of sideBySide(result, fixed)) io.out(line);
          for (const line of fixesSaid(result, fixed)) io.out(s.dim(line));
        } finally {
          await rm(fixedDir, { recursive: true, force: true });
        }
      } finally {
        if (!opts.captures) await rm(dir, { recursive: true, force: true });
      }

      // Part four: background work that reads the parent's cache, or re-bills it.
      io.out('');
      io.out(
        s.bold(
          'Background review and summary of one 12-turn parent, naive and with cacheward/fork (Opus 5 prices):',
        ),
      );
      const rows = await compareReviewForks();
      const n = new Intl.NumberFormat('en-US');
      io.out(
        s.dim(
          `  ${'request'.padEnd(32)} ${'read'.padStart(8)} ${'written'.padStart(8)} ${'cost'.padStart(8)}`,
        ),
      );
      for (const r of rows) {
        io.out(
          `  ${r.label.padEnd(32)} ${n.format(r.read).padStart(8)} ${n.format(r.written).padStart(8)} ${formatUsd(r.cost).padStart(8)}`,
        );
      }
      setExit(wrong ? EXIT_FINDING : EXIT_OK);
    });
}

/** A folder the demo may write into: created when missing (with `mode`), refused (one line) when a file is in the way. */
async function writableFolder(flag: string, dir: string, mode?: number): Promise<void> {
  refuseFileAsFolder(flag, dir);
  try {
    await mkdir(dir, { recursive: true, ...(mode !== undefined ? { mode } : {}) });
  } catch (err) {
    throw new InputError(`${flag} ${dir}: cannot create the folder: ${(err as Error).message}`);
  }
}

/** The two reports' causes in two columns: misses and waste without the fixes, and with them. */
/** What each fix did to a cause, for the causes it removed; the rest stay because no fix may hide them. */
const GONE: Partial<Record<string, string>> = {
  tools_changed: 'tools_changed is gone: the new tool was announced and tools[] stayed byte-stable.',
  fork_diverged:
    "fork_diverged is gone: the review fork started from its parent's fix state (the frozen tools), so its extra tools went in deferred and it read the parent's cache.",
  messages_edited: 'messages_edited is gone: the re-serialized history kept its first-seen shape.',
};

/** The sentences under the side-by-side table, from the two results (never a fixed text). */
function fixesSaid(without: AnalysisResult, withFixes: AnalysisResult): string[] {
  const count = (r: AnalysisResult, c: string) => r.byCause.find((x) => x.cause === c)?.misses ?? 0;
  const lines: string[] = [];
  for (const c of without.byCause) {
    if (count(withFixes, c.cause) < c.misses && GONE[c.cause]) lines.push(...wrap(GONE[c.cause] as string));
  }
  const kept = without.byCause
    .filter((c) => c.cause !== 'cold_start' && count(withFixes, c.cause) >= c.misses)
    .map((c) => c.cause);
  if (kept.length)
    lines.push(
      ...wrap(
        `${kept.join(', ')} stay: real changes no fix may hide, or cache events (expiry, lookback, concurrency).`,
      ),
    );
  return lines;
}

/** Words in lines of at most `width` characters, indented by two spaces. */
function wrap(text: string, width = 100): string[] {
  const out: string[] = [];
  let line = '';
  for (const word of text.split(' ')) {
    if (line && line.length + word.length + 1 > width) {
      out.push(`  ${line}`);
      line = word;
    } else line = line ? `${line} ${word}` : word;
  }
  if (line) out.push(`  ${line}`);
  return out;
}

function sideBySide(without: AnalysisResult, withFixes: AnalysisResult): string[] {
  const causes = [
    ...new Set([...without.byCause.map((c) => c.cause), ...withFixes.byCause.map((c) => c.cause)]),
  ];
  const cell = (a: AnalysisResult, cause: string) => {
    const c = a.byCause.find((x) => x.cause === cause);
    return c ? `${c.misses} × ${formatUsd(c.waste)}` : '-';
  };
  const rows = [
    ['', 'without fixes', 'with fixes'],
    ['spend', formatUsd(without.totals.cost), formatUsd(withFixes.totals.cost)],
    ['waste', formatUsd(without.totals.waste), formatUsd(withFixes.totals.waste)],
    [
      'hit rate',
      `${((without.totals.hitRate ?? 0) * 100).toFixed(1)}%`,
      `${((withFixes.totals.hitRate ?? 0) * 100).toFixed(1)}%`,
    ],
    ...causes.map((c) => [c, cell(without, c), cell(withFixes, c)]),
  ];
  const w = [0, 1, 2].map((i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  return rows.map(
    (r) =>
      `  ${(r[0] ?? '').padEnd(w[0] ?? 0)}  ${(r[1] ?? '').padStart(w[1] ?? 0)}  ${(r[2] ?? '').padStart(w[2] ?? 0)}`,
  );
}
