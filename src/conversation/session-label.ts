// A request's session label, in DESIGN.md's order: x-cacheward-session, Claude Code's session header,
// metadata.user_id's session, OpenAI prompt_cache_key. A label groups; it never decides continuation.

/** Where a label came from. */
export type LabelSource = 'header' | 'claude-code' | 'metadata' | 'prompt_cache_key';

export interface SessionLabel {
  key: string;
  source: LabelSource;
}

/** Header lookup by lower-case name: a `Headers`, or a plain record of lower-case names. */
export type HeaderLookup = Headers | Readonly<Record<string, string | undefined>>;

const headerOf = (h: HeaderLookup, name: string): string | undefined =>
  h instanceof Headers ? (h.get(name) ?? undefined) : h[name];

/** Claude Code's `metadata.user_id` ends in `_session_<uuid>` (or is JSON with a `session_id`). */
const USER_ID_SESSION = /session_([0-9a-zA-Z-]+)\s*$/;

function metadataSession(fields: Readonly<Record<string, unknown>> | undefined): string | undefined {
  const metadata = fields?.metadata;
  if (!metadata || typeof metadata !== 'object') return undefined;
  const userId = (metadata as { user_id?: unknown }).user_id;
  if (typeof userId !== 'string') return undefined;
  const m = USER_ID_SESSION.exec(userId);
  if (m?.[1]) return m[1];
  if (userId.startsWith('{')) {
    try {
      const v = JSON.parse(userId) as { session_id?: unknown };
      if (typeof v.session_id === 'string' && v.session_id) return v.session_id;
    } catch {
      // not JSON: no session in it
    }
  }
  return undefined;
}

/** The label a request carries, if any. */
export function sessionLabel(
  headers: HeaderLookup,
  fields: Readonly<Record<string, unknown>> | undefined,
): SessionLabel | undefined {
  const own = headerOf(headers, 'x-cacheward-session');
  if (own) return { key: own, source: 'header' };
  const cc = headerOf(headers, 'x-claude-code-session-id');
  if (cc) return { key: cc, source: 'claude-code' };
  const meta = metadataSession(fields);
  if (meta) return { key: meta, source: 'metadata' };
  if (typeof fields?.prompt_cache_key === 'string' && fields.prompt_cache_key)
    return { key: `pck:${fields.prompt_cache_key}`, source: 'prompt_cache_key' };
  return undefined;
}
