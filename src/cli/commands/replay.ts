// `cacheward replay PATH [--fix …] [--gate] [--restart-at N]`: captured requests through the fixes with
// fresh state, the four invariants checked, and the tokens re-written with and without. Exit 1 on a violation with --gate.

import { type Command, Option } from 'commander';
import { InputError } from '../../core/errors.js';
import { fixRegistry } from '../../fixes/registry.js';
import { replayCaptures } from '../../replay/replay-captures.js';
import { captureInputs } from '../capture-inputs.js';
import { EXIT_FINDING, EXIT_OK } from '../exit-codes.js';
import { type CliIO, styles } from '../io.js';
import { nothingReplayed } from '../replay-inputs.js';

const n = new Intl.NumberFormat('en-US');

export function registerReplay(program: Command, io: CliIO, setExit: (code: number) => void): void {
  program
    .command('replay')
    .description(
      'replay full-mode captures through fixes and check they keep the prefix stable and harm nothing',
    )
    .argument('<paths...>', 'capture files or folders (captured with --capture full)')
    .option(
      '--fix <names>',
      'fixes to apply, comma-separated: tools-freeze, tools-sort, pin-reminders, ttl, strip-billing-header',
      '',
    )
    .addOption(new Option('--ttl <ttl>', 'the TTL the ttl fix sets').choices(['5m', '1h']).default('1h'))
    .option('--gate', 'exit 1 if any invariant is violated, listing each')
    .option('--restart-at <n>', 'replay a proxy restart before request N (state kept, as on disk)')
    .option('--json', 'print the result as JSON')
    .action(
      async (
        paths: string[],
        opts: { fix: string; ttl: '5m' | '1h'; gate?: boolean; restartAt?: string; json?: boolean },
      ) => {
        let fixes: ReturnType<ReturnType<typeof fixRegistry>['resolve']>;
        try {
          fixes = fixRegistry(opts.ttl).resolve(
            opts.fix
              .split(',')
              .map((f) => f.trim())
              .filter(Boolean),
          );
        } catch (err) {
          throw new InputError((err as Error).message);
        }
        const restartAt = opts.restartAt === undefined ? undefined : Number(opts.restartAt);
        if (restartAt !== undefined && (!Number.isInteger(restartAt) || restartAt < 1))
          throw new InputError(`--restart-at ${opts.restartAt}: a request number from 1`);
        const result = await replayCaptures(await captureInputs(paths), {
          fixes,
          ...(restartAt ? { restartAt } : {}),
          onWarning: (w) => io.err(`cacheward: warning: ${w}`),
        });
        // A gate that checked nothing must not pass.
        if (!result.requests) throw nothingReplayed(paths, result);
        if (opts.json) io.out(JSON.stringify(result, null, 2));
        else {
          const s = styles(io.color);
          io.out(
            s.bold(
              `cacheward replay: ${result.requests} requests through ${fixes.map((f) => f.name).join(', ') || 'no fixes'}; ${result.changed} changed`,
            ),
          );
          if (result.skipped)
            io.out(
              s.dim(
                `  ${result.skipped} records skipped (not full mode, not a prompt route, a count_tokens call, or refused upstream)`,
              ),
            );
          const w = result.totals.withoutFixes;
          const f = result.totals.withFixes;
          io.out(
            `  tokens re-written (cache model): ${n.format(w)} without the fixes, ${n.format(f)} with them${w ? ` (${(((w - f) / w) * 100).toFixed(1)}% gone)` : ''}`,
          );
          for (const x of result.sessions) {
            io.out(
              s.dim(
                `    ${x.session.padEnd(24)} ${n.format(x.withoutFixes.rewritten).padStart(10)} -> ${n.format(x.withFixes.rewritten).padStart(10)}`,
              ),
            );
          }
          if (!result.violations.length)
            io.out(s.green('  invariants: stability, safety, conservation, fidelity all hold'));
          for (const v of result.violations)
            io.out(
              s.yellow(
                `  ${v.invariant}: request ${v.position} (${v.requestId}, session ${v.session}): ${v.message}`,
              ),
            );
        }
        setExit(opts.gate && result.violations.length ? EXIT_FINDING : EXIT_OK);
      },
    );
}
