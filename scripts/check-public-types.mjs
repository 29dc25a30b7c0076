// Checks the built declarations (dist/**/*.d.ts) of every public entry point in package.json: every type a
// public name mentions, and every type those mention, is itself exported by a public entry. Reads only.

import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

/** The entry points a user may import, and their declaration files (package.json `exports`). */
export function publicEntries(root) {
  const pkg = JSON.parse(readFileSync(resolve(root, 'package.json'), 'utf8'));
  const out = [];
  for (const [name, target] of Object.entries(pkg.exports)) {
    if (typeof target !== 'object' || !target.types) continue;
    out.push({
      name: name === '.' ? pkg.name : `${pkg.name}/${name.slice(2)}`,
      file: resolve(root, target.types),
    });
  }
  return out;
}

function resolved(checker, symbol) {
  return symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol;
}

/**
 * Each public entry's names (values and types counted apart), and every type a public name reaches that no
 * public entry exports, as `Type (named by Owner, Owner's entry)`.
 */
export function publicTypeGaps(root) {
  const entries = publicEntries(root);
  const dist = resolve(root, 'dist');
  const program = ts.createProgram(
    entries.map((e) => e.file),
    {
      noEmit: true,
      skipLibCheck: true,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      types: ['node'],
    },
  );
  const checker = program.getTypeChecker();
  const exported = new Map();
  const counts = [];
  const queue = [];
  for (const entry of entries) {
    const file = program.getSourceFile(entry.file);
    if (!file) throw new Error(`${entry.file}: not built (run tsup first)`);
    const names = checker.getExportsOfModule(checker.getSymbolAtLocation(file));
    let values = 0;
    for (const name of names) {
      const symbol = resolved(checker, name);
      if (symbol.flags & ts.SymbolFlags.Value) values++;
      if (!exported.has(symbol)) exported.set(symbol, entry.name);
      queue.push({ symbol, by: name.name, entry: entry.name });
    }
    counts.push({ entry: entry.name, names: names.length, values, types: names.length - values });
  }
  const gaps = new Map();
  const seen = new Set();
  while (queue.length) {
    const { symbol, by, entry } = queue.shift();
    if (seen.has(symbol)) continue;
    seen.add(symbol);
    for (const declaration of symbol.declarations ?? []) {
      const visit = (node) => {
        let name;
        if (ts.isTypeReferenceNode(node)) name = node.typeName;
        else if (ts.isExpressionWithTypeArguments(node)) name = node.expression;
        else if (ts.isTypeQueryNode(node)) name = node.exprName;
        if (name) {
          const at = checker.getSymbolAtLocation(name);
          const target = at && resolved(checker, at);
          const decl = target?.declarations?.[0];
          if (target && decl && !(target.flags & ts.SymbolFlags.TypeParameter)) {
            const file = decl.getSourceFile().fileName;
            if (file.startsWith(dist)) {
              if (!exported.has(target) && !gaps.has(target))
                gaps.set(target, `${target.name} (named by ${by}, ${entry})`);
              queue.push({ symbol: target, by: target.name, entry });
            }
          }
        }
        ts.forEachChild(node, visit);
      };
      visit(declaration);
    }
  }
  return { counts, gaps: [...gaps.values()].sort() };
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const { counts, gaps } = publicTypeGaps(process.argv[2] ?? process.cwd());
  for (const c of counts) console.log(`${c.entry}: ${c.names} names (${c.values} values, ${c.types} types)`);
  for (const g of gaps) console.error(`not exported by any entry point: ${g}`);
  if (gaps.length) {
    console.error(`public types: ${gaps.length} type(s) a public name mentions are not exported`);
    process.exit(1);
  }
  console.log('public types: every type a public name mentions is exported');
}
