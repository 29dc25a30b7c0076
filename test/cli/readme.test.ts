// The README, the front door: its two commands exist, every link into docs/ resolves (file and anchor), and
// it stays short. It pins no wording: what the README says is checked by running it, not by regexes.

import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '../..');
const readme = readFileSync(join(root, 'README.md'), 'utf8');

/** GitHub's anchor for a heading: lower case, punctuation other than - and _ dropped, spaces to -. */
function anchor(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

function anchorsOf(file: string): Set<string> {
  const text = readFileSync(file, 'utf8').replace(/```[\s\S]*?```/g, '');
  return new Set(
    text.split('\n').flatMap((l) => (/^#{1,6} /.test(l) ? [anchor(l.replace(/^#+ /, ''))] : [])),
  );
}

/** Every relative markdown link of a file: [text](path#anchor). */
function linksOf(file: string): Array<{ target: string; hash?: string }> {
  const text = readFileSync(file, 'utf8').replace(/```[\s\S]*?```/g, '');
  return [...text.matchAll(/\]\(([^)\s]+)\)/g)]
    .map((m) => m[1] as string)
    .filter((l) => !/^[a-z]+:/.test(l))
    .map((l) => {
      const [path, hash] = l.split('#');
      return { target: path ? join(dirname(file), path) : file, ...(hash ? { hash } : {}) };
    });
}

describe('the README, the front door', () => {
  it('has the two commands, and both exist', () => {
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
      scripts: Record<string, string>;
    };
    expect(readme).toContain('npm install && npm start');
    expect(readme).toContain('npm test ');
    expect(pkg.scripts.start).toBeDefined();
    expect(pkg.scripts.test).toBeDefined();
  });

  it('is at most 300 lines', () => {
    expect(readme.split('\n').length).toBeLessThanOrEqual(300);
  });

  it('links only to files and headings that exist, and so does every page under docs/', () => {
    const pages = [join(root, 'README.md'), join(root, 'CHANGELOG.md')];
    for (const f of readFileSync(join(root, 'README.md'), 'utf8').matchAll(/\]\((docs\/[^)#\s]+\.md)/g))
      pages.push(join(root, f[1] as string));
    const broken: string[] = [];
    for (const page of new Set(pages)) {
      if (!existsSync(page)) {
        broken.push(`README.md: ${page}`);
        continue;
      }
      for (const { target, hash } of linksOf(page)) {
        if (!existsSync(target)) broken.push(`${page}: ${target}`);
        else if (hash && target.endsWith('.md') && !anchorsOf(target).has(hash))
          broken.push(`${page}: ${target}#${hash}`);
      }
    }
    expect(broken).toEqual([]);
  });
});
