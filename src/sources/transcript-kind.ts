// Which source a JSON-lines file is, from its first lines: a cacheward capture, a Claude Code transcript or a
// Codex rollout. Pure: it reads only the text it is given (the head of a file) and decides nothing else.

import { isObj } from '../core/json.js';
import { CLAUDE_CODE_TYPES } from './claude-code-transcript.js';

export type SourceKind = 'capture' | 'claude-code' | 'codex';

/** The kind of one parsed line, if it is any. */
function kindOfLine(v: unknown): SourceKind | undefined {
  if (!isObj(v)) return undefined;
  if (v.v === 1 && typeof v.id === 'string' && isObj(v.times)) return 'capture';
  if (typeof v.type !== 'string') return undefined;
  if (isObj(v.payload) && typeof v.timestamp === 'string' && v.type === 'session_meta') return 'codex';
  if (CLAUDE_CODE_TYPES.has(v.type) && (typeof v.sessionId === 'string' || typeof v.uuid === 'string'))
    return 'claude-code';
  // Lines that carry neither (`summary`, `file-history-snapshot`) say nothing yet: the next line does.
  return undefined;
}

/**
 * The kind of a file from its head (its first bytes as text): the first complete lines decide; a first line
 * longer than the head is judged by how it begins. Undefined when nothing in the head is any of the three.
 */
export function sourceKind(head: string): SourceKind | undefined {
  const lines = head.split('\n');
  const complete = lines.length > 1 ? lines.slice(0, -1) : [];
  for (const text of complete.slice(0, 16)) {
    if (text.trim() === '') continue;
    try {
      const kind = kindOfLine(JSON.parse(text));
      if (kind) return kind;
    } catch {
      // A torn line: the next one may tell.
    }
  }
  const first = (complete.length ? complete.join('\n') : head).trimStart();
  if (first.startsWith('{"v":1,"id":')) return 'capture';
  if (/^\{"timestamp":"[^"]*","type":"session_meta"/.test(first)) return 'codex';
  if (/^\{"(parentUuid|type)":/.test(first) && first.includes('"sessionId":"')) return 'claude-code';
  return undefined;
}

/** The first time a head names (`"timestamp":"…"`), ms since the epoch, or undefined. */
export function firstTimestamp(head: string): number | undefined {
  const m = /"timestamp":"([^"]{10,40})"/.exec(head);
  const t = m ? Date.parse(m[1] as string) : Number.NaN;
  return Number.isNaN(t) ? undefined : t;
}
