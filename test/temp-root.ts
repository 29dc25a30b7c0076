// Vitest's global setup: every folder a test, its proxy or its agent binary makes under TMPDIR goes in one folder
// of this run's, removed when the run ends. It must never remove anything it did not make.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export default function setup(): () => void {
  const root = mkdtempSync(join(tmpdir(), 'cacheward-tests-'));
  const before = { TMPDIR: process.env.TMPDIR, TMP: process.env.TMP, TEMP: process.env.TEMP };
  // Set before vitest starts its workers, so they and everything they spawn inherit it.
  process.env.TMPDIR = root;
  process.env.TMP = root;
  process.env.TEMP = root;
  return () => {
    for (const [name, value] of Object.entries(before)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
    // A child the suite killed may still be closing a file in it: a few tries, then the folder is left and said.
    try {
      rmSync(root, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 });
    } catch (error) {
      console.warn(`the test run's temporary folder ${root} was not removed: ${(error as Error).message}`);
    }
  };
}
