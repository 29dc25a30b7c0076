// Loaded with `node --import` into a benchmarked process: measures how long its event loop was held
// (perf_hooks.monitorEventLoopDelay, 1 ms resolution). Bench-only; it never changes what the process does.
// On SIGUSR2 it writes {max, p99} in ms since the last SIGUSR2 to $CACHEWARD_LOOP_PROBE, then resets.

import { writeFileSync } from 'node:fs';
import { monitorEventLoopDelay } from 'node:perf_hooks';

const file = process.env.CACHEWARD_LOOP_PROBE;
if (file) {
  const h = monitorEventLoopDelay({ resolution: 1 });
  h.enable();
  process.on('SIGUSR2', () => {
    const out = { max: h.max / 1e6, p99: h.percentile(99) / 1e6 };
    h.reset();
    writeFileSync(file, JSON.stringify(out));
  });
}
