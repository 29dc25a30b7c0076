import { defineConfig } from 'tsup';

export default defineConfig({
  entry: {
    index: 'src/index.ts',
    internal: 'src/internal.ts',
    'sim/index': 'src/sim/index.ts',
    'proxy/index': 'src/proxy/index.ts',
    'fork/index': 'src/fork/index.ts',
    'guard/index': 'src/guard/index.ts',
    'testing/index': 'src/testing/index.ts',
    'cli/bin': 'src/cli/bin.ts',
  },
  format: ['esm'],
  target: 'node20',
  platform: 'node',
  dts: {
    entry: [
      'src/index.ts',
      'src/internal.ts',
      'src/sim/index.ts',
      'src/proxy/index.ts',
      'src/fork/index.ts',
      'src/guard/index.ts',
      'src/testing/index.ts',
    ],
  },
  sourcemap: true,
  clean: true,
  splitting: true,
  shims: false,
});
