#!/usr/bin/env node
// The `cacheward` executable: runs the CLI and exits with its code; a reader gone (EPIPE) ends it quietly, a cut stdout file with exit 2.
// Nothing else lives here, so every command can be tested in-process through runCli.

import { processIO } from './io.js';
import { runCli } from './program.js';
import { endWhenIdle, requestStop } from './stop-signal.js';

let stdoutClosed = false;
// `cacheward report … | head`: once the reader is gone, nothing more is worth printing. A server closes
// and flushes first (its command is waiting for a stop); any other command ends at once. Exit 0 either way.
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (stdoutClosed) return;
  if (err.code !== 'EPIPE') {
    process.stderr.write(`cacheward: cannot write to stdout: ${err.message}\n`);
    process.exit(2);
  }
  stdoutClosed = true;
  process.exitCode = 0;
  if (!requestStop('EPIPE')) process.exit(0);
});
// Nobody reads stderr any more: keep going silently rather than crash on a diagnostic.
process.stderr.on('error', () => {});

// Stdout to a file that cannot take it all (a full disk): one line, exit 2, and a server stops (io.ts).
let outFailed = false;
const io = processIO((why) => {
  if (outFailed) return;
  outFailed = true;
  process.stderr.write(`cacheward: cannot write to ${why}\n`);
  requestStop('stdout');
});

runCli(process.argv.slice(2), io).then(
  (code) => {
    process.exitCode = outFailed ? 2 : stdoutClosed ? 0 : code;
    endWhenIdle();
  },
  (err: unknown) => {
    process.stderr.write(`cacheward: ${String(err)}\n`);
    process.exitCode = 2;
    endWhenIdle();
  },
);
