#!/usr/bin/env node
// The `cacheward` executable: runs the CLI and exits with its code.
// Nothing else lives here, so every command can be tested in-process through runCli.

import { runCli } from './program.js';

runCli(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`cacheward: ${String(err)}\n`);
    process.exitCode = 2;
  },
);
