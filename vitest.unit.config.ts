// The unit suite (`npm run test:unit`): the in-process tests, in seconds, with no built dist/, Chromium, Redis or
// agent binary. A test that needs one is listed below; run here, its helper throws (test/suite.ts), never skips.

import { defineConfig, mergeConfig } from 'vitest/config';
import base from './vitest.config.js';

/** Tests that run the built CLI or a child script on dist/ (test/suite.ts: builtCli, needsBuild). */
const BUILT = [
  'test/analyze/claude-code-lineage.test.ts',
  'test/cli/demo.test.ts',
  'test/cli/never-crash.test.ts',
  'test/cli/proxy-fix-ttl.test.ts',
  'test/cli/proxy-log.test.ts',
  'test/cli/proxy-stop-line.test.ts',
  'test/cli/proxy-token.test.ts',
  'test/cli/proxy-warm-up.test.ts',
  'test/cli/run.test.ts',
  'test/cli/full-disk-cli.test.ts',
  'test/guard/cas-reliability.test.ts',
  'test/guard/guard.test.ts',
  'test/proxy/live-bounds.test.ts',
  'test/proxy/not-captured.test.ts',
  'test/proxy/origins-secrets.test.ts',
  'test/proxy/process-lifecycle.test.ts',
  'test/proxy/reliability.test.ts',
  'test/sim/server.test.ts',
  'test/sources/bad-transcripts.test.ts',
  'test/telemetry/otlp.test.ts',
  'test/watch/watch-agents.test.ts',
  'test/watch/watch-cli.test.ts',
  'test/watch/watch-files.test.ts',
  'test/watch/watch-resume.test.ts',
];

/** Tests that start Chromium (test/headless-chromium.ts) or redis-server (test/state/redis-server.ts). */
const BROWSER_OR_REDIS = [
  'test/analyze/html-report.test.ts',
  'test/proxy/live-page.test.ts',
  'test/proxy/fix-refusal.test.ts',
  'test/state/live-feed.test.ts',
  'test/state/redis-state.test.ts',
];

/** Tests that measure their own process (its heap, V8's collections): they need a process to themselves. */
const OWN_PROCESS = ['src/proxy/memory-release.test.ts', 'src/prefix/taken-over-memory.test.ts'];

/** Tests that replace a node module (`vi.mock`): they need a module graph of their own, which shared workers do not give. */
const MOCKS = [
  'test/capture/full-disk-writer.test.ts',
  'test/cli/run-full-disk.test.ts',
  'test/state/state-file-full-disk.test.ts',
];

/** In-process, but seconds each (fuzzing, differential runs, huge bodies, a whole proxy per case): the full suite's. */
const SLOW = [
  'test/fixes/differential.test.ts',
  'test/fixes/incremental-fix-fuzz.test.ts',
  'test/prefix/incremental-fuzz.test.ts',
  'test/proxy/forwarding.test.ts',
  'test/proxy/capture-bounds.test.ts',
  'src/proxy/warm-up.test.ts',
  'src/proxy/after-response-steps.test.ts',
];

export default mergeConfig(
  base,
  defineConfig({
    test: {
      env: { CACHEWARD_SUITE: 'unit' },
      exclude: [
        '**/node_modules/**',
        'test/clients/**',
        'test/fleet/**',
        ...BUILT,
        ...BROWSER_OR_REDIS,
        ...OWN_PROCESS,
        ...MOCKS,
        ...SLOW,
      ],
      // The files of a worker share its modules (no fresh module graph per file): the loop stays in seconds,
      // and a test that needs a fresh process is in OWN_PROCESS above. The full suite isolates every file.
      isolate: false,
      // Worker threads start faster than the full suite's forked processes; nothing here needs a process.
      pool: 'threads',
      // Both cores (vitest's default leaves one to itself: on two cores, one worker).
      maxWorkers: 2,
    },
  }),
);
