// The `cacheward` command line: one commander program, one file per command, exit codes per DESIGN.md.
// It never lets an exception escape as a stack trace: errors become one line and exit code 2.

import { Command, CommanderError } from 'commander';
import { CachewardError } from '../core/errors.js';
import { VERSION } from '../core/version.js';
import { registerCa } from './commands/ca.js';
import { registerDemo } from './commands/demo.js';
import { registerDiff } from './commands/diff.js';
import { registerPrices } from './commands/prices.js';
import { registerProxy } from './commands/proxy.js';
import { registerReplay } from './commands/replay.js';
import { registerReport } from './commands/report.js';
import { registerRun } from './commands/run.js';
import { registerShow } from './commands/show.js';
import { registerSim } from './commands/sim.js';
import { registerWatch } from './commands/watch.js';
import { EXIT_OK, EXIT_USAGE } from './exit-codes.js';
import { type CliIO, processIO } from './io.js';

export { VERSION };

/** Runs the CLI with `argv` (without node and script) and resolves to the exit code. */
export async function runCli(argv: readonly string[], io: CliIO = processIO()): Promise<number> {
  let exitCode = EXIT_OK;
  const setExit = (code: number) => {
    exitCode = code;
  };
  const program = new Command();
  program
    .name('cacheward')
    .description('Keeps LLM prompt caches warm: see, price and fix every cache miss.')
    .version(VERSION, '-v, --version')
    // `cacheward run [options] -- COMMAND --its-own-flags`: options after the command are the command's.
    .enablePositionalOptions()
    .showHelpAfterError('(add --help for usage)')
    .exitOverride()
    .configureOutput({
      writeOut: (s) => io.out(s.replace(/\n$/, '')),
      writeErr: (s) => io.err(s.replace(/\n$/, '')),
    });
  registerDiff(program, io, setExit);
  registerDemo(program, io, setExit);
  registerSim(program, io, setExit);
  registerProxy(program, io, setExit);
  registerReport(program, io, setExit);
  registerReplay(program, io, setExit);
  registerPrices(program, io, setExit);
  registerShow(program, io, setExit);
  registerRun(program, io, setExit);
  registerCa(program, io, setExit);
  registerWatch(program, io, setExit);
  for (const cmd of program.commands) cmd.exitOverride();
  try {
    await program.parseAsync([...argv], { from: 'user' });
    return exitCode;
  } catch (err) {
    if (err instanceof CommanderError) {
      if (
        err.code === 'commander.helpDisplayed' ||
        err.code === 'commander.version' ||
        err.code === 'commander.help'
      ) {
        return EXIT_OK;
      }
      return EXIT_USAGE;
    }
    if (err instanceof CachewardError) {
      io.err(`cacheward: ${err.message}`);
      return EXIT_USAGE;
    }
    io.err(`cacheward: unexpected error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    return EXIT_USAGE;
  }
}
