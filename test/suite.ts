// Which suite a test runs in: `npm run test:unit` (vitest.unit.config.ts) runs in-process tests only, with no
// built dist/, Chromium, Redis or agent binary; the helpers that need one call these and throw there, loudly.

import { join } from 'node:path';

/** Whether this run is the unit suite (vitest.unit.config.ts sets it). */
export const UNIT_SUITE = process.env.CACHEWARD_SUITE === 'unit';

/**
 * Throws under the unit suite, naming what the test needs: its file belongs to the full suite (`npm test`),
 * in vitest.unit.config.ts's exclude list.
 */
export function fullSuiteOnly(what: string): void {
  if (UNIT_SUITE)
    throw new Error(
      `${what}: not in the unit suite (npm run test:unit runs in-process tests only): list this test file in vitest.unit.config.ts's exclude`,
    );
}

/** A file that runs the built dist/ (the CLI, or a child script that imports it); `npm test` builds it first. */
export function needsBuild(path: string): string {
  fullSuiteOnly(`${path} runs the built dist/`);
  return path;
}

/** The built CLI, dist/cli/bin.js. */
export function builtCli(): string {
  return needsBuild(join(import.meta.dirname, '../dist/cli/bin.js'));
}
