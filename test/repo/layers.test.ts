// The layer lint (scripts/check-layers.mjs) passes on src/ and fails each kind of import against the floors.
// Writes only into its own temporary trees.

import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
// @ts-expect-error: a plain .mjs script, no types.
import { layerViolations } from '../../scripts/check-layers.mjs';

const trees: string[] = [];

function tree(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), 'cacheward-layers-'));
  trees.push(root);
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  return root;
}

afterEach(() => {
  for (const t of trees.splice(0)) rmSync(t, { recursive: true, force: true });
});

describe('the layer lint', () => {
  it('finds no import against the floors in src/', () => {
    expect(layerViolations(process.cwd())).toEqual([]);
  });

  it('fails an import that runs up, a type import too', () => {
    const root = tree({
      'src/core/a.ts': "import type { B } from '../proxy/b.js';\nexport type A = B;\n",
      'src/proxy/b.ts': 'export type B = 1;\n',
    });
    expect(layerViolations(root)).toEqual([
      expect.stringContaining('src/core/a.ts -> src/proxy/b.ts: runs up'),
    ]);
  });

  it('fails an import between two folders of one floor, a dynamic one too', () => {
    const root = tree({
      'src/analyze/a.ts': "export const a = () => import('../sources/b.js');\n",
      'src/sources/b.ts': 'export const b = 1;\n',
    });
    expect(layerViolations(root)[0]).toContain('stand on one floor');
  });

  it('fails a folder that has no floor, and lets a folder import itself and the floors below', () => {
    const root = tree({
      'src/newthing/a.ts': "import { b } from '../core/b.js';\nexport const a = b;\n",
      'src/core/b.ts': "import { c } from './c.js';\nexport const b = c;\n",
      'src/core/c.ts': 'export const c = 1;\n',
      'src/cli/d.ts': "import { b } from '../core/b.js';\nexport { b };\n",
      'src/core/b.test.ts': "import { d } from '../cli/d.js';\n",
    });
    const problems = layerViolations(root).filter((p: string) => !p.includes('no longer imported'));
    expect(problems).toEqual([expect.stringContaining('src/newthing/ has no floor')]);
  });
});
