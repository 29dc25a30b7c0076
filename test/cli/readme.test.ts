import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PRICES_HELP } from '../../src/cli/commands/prices.js';

const readme = readFileSync(join(import.meta.dirname, '../../README.md'), 'utf8');

describe('the README, the front door', () => {
  it('says that npm test installs Chromium through apt when it is missing', () => {
    expect(readme).toMatch(
      /`npm test` first runs `scripts\/ensure-chromium\.sh`, which installs Debian's\s+Chromium with `apt-get` when it is missing/,
    );
    expect(readFileSync(join(import.meta.dirname, '../../scripts/ensure-chromium.sh'), 'utf8')).toContain(
      'apt-get install',
    );
  });

  it('documents the prices file format with every field, as --help does, and cacheward prices --example', () => {
    for (const field of [
      '"provider"',
      '"model"',
      '"input"',
      '"write5m"',
      '"write1h"',
      '"read"',
      '"output"',
      '"date"',
    ]) {
      expect(readme).toContain(field);
      expect(PRICES_HELP).toContain(field);
    }
    expect(readme).toContain('cacheward prices --example');
    expect(readme).toContain('dollars per million tokens');
  });

  it('shows the one-command path and the CI thresholds', () => {
    expect(readme).toContain('cacheward run --sim -- claude');
    expect(readme).toContain("--fail-on 'waste>5' --fail-on 'hit-rate<80'");
  });
});
