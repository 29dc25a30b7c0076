// Runs the vitest suite and ends with one plain line, "N passed, N failed, N skipped", that any CI can read.
// It never hides vitest's own output or changes its exit code.

import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync } from 'node:fs';

mkdirSync('test-output', { recursive: true });
const report = 'test-output/vitest.json';
// A report left by an earlier run must never be read as this run's: a crash before writing one is a failure.
rmSync(report, { force: true });
const run = spawnSync(
  process.execPath,
  [
    'node_modules/vitest/vitest.mjs',
    'run',
    '--reporter=default',
    '--reporter=json',
    `--outputFile=${report}`,
    ...process.argv.slice(2),
  ],
  { stdio: 'inherit' },
);
let summary = 'tests: 0 passed, 1 failed (vitest wrote no report)';
try {
  const r = JSON.parse(readFileSync(report, 'utf8'));
  const skipped = (r.numPendingTests ?? 0) + (r.numTodoTests ?? 0);
  summary = `tests: ${r.numPassedTests} passed, ${r.numFailedTests} failed, ${skipped} skipped`;
} catch {}
console.log(summary);
process.exit(run.status ?? 1);
