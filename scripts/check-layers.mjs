// Lint for the layers (docs/architecture.md, "The layers"): every import in src/ runs down, from a folder to
// its own files or to a folder on a lower floor, never to a peer or above. It reads files and changes none.

import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

/**
 * The folders of src/, floor by floor from the ground. A folder imports only folders on lower floors; the
 * folders of one floor never import each other. The entry files at src/'s root (index.ts, internal.ts) stand
 * above every floor.
 */
export const FLOORS = [
  ['core'],
  ['wire'],
  ['prefix'],
  ['cache'],
  ['conversation'],
  ['fixes', 'fork', 'guard', 'sim'],
  ['record'],
  ['analyze', 'sources'],
  ['capture', 'state'],
  ['replay', 'report', 'telemetry'],
  ['proxy'],
  ['demo', 'testing', 'watch'],
  ['cli'],
];

/**
 * Imports that run against the floors and are allowed for now, each with why and until when. An entry that
 * no import uses any more is itself an error, so the list only shrinks.
 */
export const ALLOWED = [];

const floorOf = new Map(FLOORS.flatMap((names, floor) => names.map((name) => [name, floor])));

function sourceFiles(dir) {
  const out = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...sourceFiles(path));
    else if (/\.tsx?$/.test(entry.name) && !/\.test\.tsx?$/.test(entry.name) && !entry.name.endsWith('.d.ts'))
      out.push(path);
  }
  return out;
}

/** The folder of src/ a file is in, or undefined for an entry file at src/'s root or a file outside src/. */
function folderOf(srcDir, file) {
  const parts = relative(srcDir, file).split(sep);
  if (parts[0] === '..' || parts.length < 2) return undefined;
  return parts[0];
}

/**
 * Every import of `root`/src that breaks the floors, as `file -> imported: why`; an import is any static or
 * dynamic import, `export … from`, or `import type`, of a relative path.
 */
export function layerViolations(root) {
  const srcDir = resolve(root, 'src');
  const problems = [];
  const used = new Set();
  for (const file of sourceFiles(srcDir)) {
    const from = folderOf(srcDir, file);
    const name = relative(root, file).split(sep).join('/');
    if (from !== undefined && !floorOf.has(from)) {
      problems.push(
        `${name}: src/${from}/ has no floor: add it to FLOORS (scripts/check-layers.mjs) and docs/architecture.md`,
      );
      continue;
    }
    const { importedFiles } = ts.preProcessFile(readFileSync(file, 'utf8'), true, true);
    for (const { fileName } of importedFiles) {
      if (!fileName.startsWith('.')) continue;
      const target = resolve(dirname(file), fileName).replace(/\.js$/, '.ts');
      const to = folderOf(srcDir, target);
      if (from === undefined || to === undefined || to === from) continue;
      const targetName = relative(root, target).split(sep).join('/');
      const allowed = ALLOWED.find((a) => a.from === name && a.to === targetName);
      if (allowed) {
        used.add(allowed);
        continue;
      }
      if (!floorOf.has(to)) {
        problems.push(`${name} -> ${targetName}: src/${to}/ has no floor`);
        continue;
      }
      const a = floorOf.get(from);
      const b = floorOf.get(to);
      if (b === a)
        problems.push(
          `${name} -> ${targetName}: ${from}/ and ${to}/ stand on one floor and never import each other`,
        );
      else if (b > a)
        problems.push(`${name} -> ${targetName}: runs up, from ${from}/ (floor ${a}) to ${to}/ (floor ${b})`);
    }
  }
  for (const a of ALLOWED)
    if (!used.has(a))
      problems.push(`${a.from} -> ${a.to}: allowed in ALLOWED but no longer imported: remove the entry`);
  return problems;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const root = process.argv[2] ?? process.cwd();
  const problems = layerViolations(root);
  for (const p of problems) console.error(p);
  if (problems.length) {
    console.error(
      `layers: ${problems.length} import(s) against the floors (docs/architecture.md, "The layers")`,
    );
    process.exit(1);
  }
  console.log('layers: every import in src/ runs down');
}
