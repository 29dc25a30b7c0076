// Rewrites a request body by splicing bytes: top-level fields replaced or added, messages inserted, the
// rest copied as sent, so a fix costs O(what it changes) plus one copy. Pure. It never parses the body:
// the spans come from the prefix model's scan, and it refuses (undefined) any body it cannot splice exactly.

import type { Json } from '../core/json.js';
import type { RequestBody } from '../wire/request-body.js';
import { concatBody } from './body-buffer.js';

/** What to change: top-level fields set to new values, messages inserted before a message index. */
export interface BodyEdits {
  /** New values of top-level fields; a field the body lacks is appended, as `{ ...body, field }` does. */
  set?: Readonly<Record<string, unknown>>;
  /**
   * New values of top-level fields given as the text `JSON.stringify` writes for them (a caller that keeps
   * it from request to request); the same as `set` with those values, without writing them again.
   */
  setText?: Readonly<Record<string, string>>;
  /** Messages to insert before `before` (the index in the body's own messages; its length appends). */
  insert?: ReadonlyArray<{ before: number; message: Json }>;
}

/**
 * The edited body, byte for byte what `JSON.stringify({ ...JSON.parse(body), ...set, messages })` (with the
 * insertions) would write. Only a body whose bytes are already what `JSON.stringify` writes (the scan's
 * `clean`: compact, no escapes it would rewrite, no integer-like or repeated keys) can be spliced; for any
 * other, undefined, and the caller writes the parsed value instead.
 */
export function spliceBody(body: RequestBody, edits: BodyEdits): Buffer | undefined {
  const { root, bytes } = body;
  if (!root.clean || root.start !== 0 || root.end !== bytes.length) return undefined;
  const pieces: Array<{ at: number; end: number; text: string }> = [];
  const appended: string[] = [];
  const fields: Array<[string, string | undefined]> = [
    ...Object.entries(edits.set ?? {}).map(([k, v]): [string, string | undefined] => [k, JSON.stringify(v)]),
    ...Object.entries(edits.setText ?? {}),
  ];
  for (const [key, text] of fields) {
    if (text === undefined) return undefined;
    const node = root.members.get(key);
    if (node) pieces.push({ at: node.start, end: node.end, text });
    else appended.push(`${JSON.stringify(key)}:${text}`);
  }
  if (edits.insert?.length) {
    const messages = root.members.get('messages');
    if (messages?.type !== 'array') return undefined;
    const items = messages.items;
    const byIndex = new Map<number, string[]>();
    for (const { before, message } of edits.insert) {
      if (before < 0 || before > items.length) return undefined;
      const list = byIndex.get(before) ?? [];
      list.push(JSON.stringify(message));
      byIndex.set(before, list);
    }
    for (const [before, list] of byIndex) {
      const item = items[before];
      if (item) pieces.push({ at: item.start, end: item.start, text: `${list.join(',')},` });
      else {
        const at = messages.end - 1;
        pieces.push({ at, end: at, text: `${items.length ? ',' : ''}${list.join(',')}` });
      }
    }
  }
  if (appended.length) {
    const at = root.end - 1;
    pieces.push({ at, end: at, text: `${root.members.size ? ',' : ''}${appended.join(',')}` });
  }
  pieces.sort((a, b) => a.at - b.at || a.end - b.end);
  const parts: Buffer[] = [];
  let pos = 0;
  for (const p of pieces) {
    if (p.at < pos) return undefined;
    parts.push(bytes.subarray(pos, p.at), Buffer.from(p.text));
    pos = p.end;
  }
  parts.push(bytes.subarray(pos));
  return concatBody(parts);
}
