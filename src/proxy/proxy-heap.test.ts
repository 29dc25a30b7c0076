import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { ANALYSIS_HEAP_FLAGS } from '../report/analysis-heap.js';
import { PROXY_HEAP_FLAGS } from './proxy-heap.js';

// setFlagsFromString ignores a flag V8 does not know; the command line refuses it. A Node whose V8 renamed
// a flag would silently run with its defaults: this says so instead.
const acceptedByNode = (flag: string) => {
  const run = spawnSync(process.execPath, [flag, '-e', '0'], { encoding: 'utf8' });
  return run.status === 0 && run.stderr === '';
};

describe('heap flags', () => {
  it('are flags this Node accepts, for the proxy and for the report', () => {
    for (const flag of [...PROXY_HEAP_FLAGS, ...ANALYSIS_HEAP_FLAGS])
      expect(acceptedByNode(flag), flag).toBe(true);
  });

  it('would notice a flag this Node does not know', () => {
    expect(acceptedByNode('--heap-growing-percentage=100')).toBe(false);
  });
});
