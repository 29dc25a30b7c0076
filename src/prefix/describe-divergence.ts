// Says a divergence in one plain sentence a person understands, plus detail lines.
// Pure text: it never colours, prints or decides exit codes (that is the CLI's job).

import type {
  BlocksChange,
  Divergence,
  ParamChange,
  PrefixChange,
  PrefixComparison,
  ToolsChange,
} from './first-divergence.js';

const fmt = new Intl.NumberFormat('en-US');

/** `1234567` → `1,234,567`. */
export function formatCount(n: number): string {
  return fmt.format(n);
}

function code(name: string): string {
  return `\`${name}\``;
}

function short(value: unknown): string {
  if (value === undefined) return '(absent)';
  const s = JSON.stringify(value);
  return s.length > 80 ? `${s.slice(0, 77)}...` : s;
}

function toolsWhat(c: ToolsChange): string {
  const parts: string[] = [];
  if (c.reordered[0]) {
    const r = c.reordered[0];
    parts.push(`${code(r.moved)} was moved before ${code(r.displaced)}`);
  }
  for (const t of c.added) {
    parts.push(
      t.before
        ? `${code(t.name)} was inserted before ${code(t.before)}`
        : `${code(t.name)} was appended at index ${t.index}`,
    );
  }
  for (const t of c.removed) parts.push(`${code(t.name)} was removed from index ${t.index}`);
  for (const n of c.schemaChanged) parts.push(`the schema of ${code(n)} changed`);
  for (const n of c.descriptionChanged) parts.push(`the description of ${code(n)} changed`);
  for (const n of c.otherChanged) parts.push(`the definition of ${code(n)} changed`);
  return parts.length ? parts.join(', ') : 'the tool list changed';
}

function paramsWhat(params: ParamChange[]): string {
  return params.map((p) => `${code(p.name)} changed from ${short(p.before)} to ${short(p.after)}`).join(', ');
}

function blocksWhat(c: BlocksChange): string {
  const kind = c.kind === 'empty' ? 'an empty message' : `a ${c.kind} block`;
  const count = c.count && c.count > 1 ? `${c.count} blocks were` : `${kind} was`;
  switch (c.edit) {
    case 'edited':
      return `${kind} was edited`;
    case 'inserted':
      return `${count} inserted`;
    case 'removed':
      return `${count} removed`;
    case 'restructured':
      return `${kind} kept its content but moved to a different message shape (split, merged or re-roled)`;
  }
}

function where(d: Divergence): string {
  const c = d.change;
  if (c.type === 'tools') return `tools diverge at index ${d.blockIndex}`;
  if (c.type === 'params') return `parameters diverge before the ${c.invalidates} level`;
  if (c.type === 'system' && c.role)
    return `system diverges at block ${c.partIndex ?? 0} (${c.role} message ${c.messageIndex ?? 0})`;
  if (c.type === 'system') return `system diverges at block ${c.partIndex ?? 0}`;
  const role = c.role ? ` (${c.role})` : '';
  return `messages diverge at message ${c.messageIndex ?? 0}${role}, block ${c.partIndex ?? 0}`;
}

/** What changed, in words: the same words for `diff`, the report and the live page. */
export function describeChange(c: PrefixChange): string {
  if (c.type === 'tools') return toolsWhat(c);
  if (c.type === 'params') return paramsWhat(c.params);
  const at =
    c.type === 'system'
      ? ` (system block ${c.partIndex ?? 0}${c.role ? `, ${c.role} message ${c.messageIndex ?? 0}` : ''})`
      : ` (message ${c.messageIndex ?? 0}${c.role ? `, ${c.role}` : ''}, block ${c.partIndex ?? 0})`;
  return `${blocksWhat(c)}${at}`;
}

/**
 * The one sentence: where, what changed, and what it costs (estimated tokens; `cost: false` leaves that to
 * a caller that says it in the provider's own count).
 */
export function describeDivergence(d: Divergence, cost = true): string {
  const c = d.change;
  const what = c.type === 'tools' ? toolsWhat(c) : c.type === 'params' ? paramsWhat(c.params) : blocksWhat(c);
  return `${where(d)}: ${what}${cost ? `; ${formatCount(d.lostTokens)} tokens after it must be re-written` : ''}`;
}

/** The sentence for a comparison, identical or not, followed by detail lines. */
export function describeComparison(cmp: PrefixComparison): string[] {
  const d = cmp.divergence;
  if (!d) {
    return [
      `prefixes agree: the shorter request (${formatCount(Math.min(cmp.a.tokens, cmp.b.tokens))} tokens) is a cacheable prefix of the other`,
    ];
  }
  const lines = [describeDivergence(d)];
  lines.push(
    `  level:        ${d.level}${d.change.type === 'params' ? ` (invalidates ${d.change.invalidates} and after)` : ''}`,
  );
  lines.push(`  block index:  ${d.blockIndex}`);
  lines.push(`  byte offset:  A ${d.byteOffset.a ?? '-'}, B ${d.byteOffset.b ?? '-'}`);
  lines.push(
    `  tokens:       ${formatCount(d.sharedTokens)} shared before, ${formatCount(d.lostTokens)} re-written after (estimated)`,
  );
  lines.push(
    `  requests:     A ${cmp.a.blocks} blocks / ${formatCount(cmp.a.tokens)} tokens, B ${cmp.b.blocks} blocks / ${formatCount(cmp.b.tokens)} tokens`,
  );
  return lines;
}
