// Which session a request belongs to, in DESIGN.md's order: x-cacheward-session, Claude Code's session
// header, metadata.user_id's session, OpenAI prompt_cache_key, else the lineage the prefix index finds.

import type { Prefix } from '../prefix/build-prefix.js';

export interface SessionKey {
  key: string;
  source: 'header' | 'claude-code' | 'metadata' | 'prompt_cache_key' | 'lineage';
}

/** Claude Code's `metadata.user_id` ends in `_session_<uuid>`. */
const USER_ID_SESSION = /session_([0-9a-zA-Z-]+)\s*$/;

/** The session named by the request itself, if any. */
export function explicitSession(
  headers: Headers,
  fields: Readonly<Record<string, unknown>> | undefined,
): SessionKey | undefined {
  const own = headers.get('x-cacheward-session');
  if (own) return { key: own, source: 'header' };
  const cc = headers.get('x-claude-code-session-id');
  if (cc) return { key: cc, source: 'claude-code' };
  const metadata = fields?.metadata;
  if (metadata && typeof metadata === 'object') {
    const userId = (metadata as { user_id?: unknown }).user_id;
    if (typeof userId === 'string') {
      const m = USER_ID_SESSION.exec(userId);
      if (m?.[1]) return { key: m[1], source: 'metadata' };
    }
  }
  if (typeof fields?.prompt_cache_key === 'string')
    return { key: `pck:${fields.prompt_cache_key}`, source: 'prompt_cache_key' };
  return undefined;
}

/**
 * Sessions by lineage: each request's message-boundary keys point at its session, so a later request that
 * extends one (or forks from it) lands in the same session. Bounded: the oldest keys are forgotten first.
 */
export class LineageIndex {
  private readonly keys = new Map<string, string>();
  constructor(private readonly max = 500_000) {}

  /** The session of the longest known prefix of `prefix`, or a new one named after its first block. */
  sessionOf(prefix: Prefix): string {
    const boundaries = messageBoundaries(prefix);
    for (let i = boundaries.length - 1; i >= 0; i--) {
      const hit = this.keys.get(boundaries[i] as string);
      if (hit) return hit;
    }
    const first = boundaries[0] ?? prefix.levels.messages.foldHash;
    return `lineage-${first.slice(0, 12)}`;
  }

  remember(prefix: Prefix, session: string): void {
    for (const key of messageBoundaries(prefix)) {
      this.keys.delete(key);
      this.keys.set(key, session);
    }
    while (this.keys.size > this.max) {
      const oldest = this.keys.keys().next().value;
      if (oldest === undefined) break;
      this.keys.delete(oldest);
    }
  }
}

/** The cache key at the end of each message (the places a conversation's requests share). */
function messageBoundaries(prefix: Prefix): string[] {
  const out: string[] = [];
  const { start, end } = prefix.levels.messages;
  for (let i = start; i < end; i++) {
    const b = prefix.blocks[i];
    const next = prefix.blocks[i + 1];
    if (b && (i + 1 >= end || next?.messageIndex !== b.messageIndex)) out.push(b.hash);
  }
  return out;
}
