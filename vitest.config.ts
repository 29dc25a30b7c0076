// The full suite (`npm test`): every test, the built CLI, Chromium, Redis and the agent binaries included.
// vitest.unit.config.ts is its in-process part, for a fast loop while working.

import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts', 'examples/**/*.test.ts'],
    testTimeout: 30_000,
    pool: 'forks',
    // One temporary folder for the run, removed at its end (test/temp-root.ts): a run leaves nothing in /tmp.
    globalSetup: ['test/temp-root.ts'],
  },
});
