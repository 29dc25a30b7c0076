// The package version, from package.json at build time.
// Nothing else: every component that reports a version reads it here.

import packageJson from '../../package.json' with { type: 'json' };

export const VERSION: string = packageJson.version;
