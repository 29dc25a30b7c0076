// The unit suite turns away what it must not run: the built CLI, a child on dist/, Chromium, Redis. Under
// `npm test` the same helpers hand the built CLI over. Starts nothing.

import { describe, expect, it } from 'vitest';
import { builtCli, fullSuiteOnly, needsBuild, UNIT_SUITE } from '../suite.js';

describe('the unit suite and the full suite', () => {
  it.runIf(UNIT_SUITE)(
    'under test:unit, every helper that needs the full suite throws, naming the config',
    () => {
      expect(() => builtCli()).toThrow(/dist\/cli\/bin\.js runs the built dist\/.*vitest\.unit\.config\.ts/);
      expect(() => needsBuild('child.mjs')).toThrow(/child\.mjs runs the built dist\//);
      expect(() => fullSuiteOnly('redis-server')).toThrow(/^redis-server: not in the unit suite/);
    },
  );

  it.runIf(!UNIT_SUITE)('under npm test, the built CLI is handed over', () => {
    expect(builtCli()).toMatch(/dist\/cli\/bin\.js$/);
    expect(() => fullSuiteOnly('redis-server')).not.toThrow();
  });
});
