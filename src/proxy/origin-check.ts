// Which browser requests the proxy serves: its own pages, and pages on origins it was told about. A page
// on another site must never make the browser send through it; SDKs, curl and agents send no Origin.

/** A browser's verdict on a request, from its Origin and Sec-Fetch-* headers. */
export type OriginVerdict = { ok: true } | { ok: false; message: string };

/** The `scheme://host[:port]` of an origin, lower-cased, the default port left out; undefined if not one. */
function normalOrigin(value: string): string | undefined {
  try {
    const u = new URL(value);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') return undefined;
    return `${u.protocol}//${u.host}`;
  } catch {
    return undefined;
  }
}

/** The `host[:port]` a Host header names, as a URL would write it (default port left out). */
function normalHost(host: string): string | undefined {
  try {
    return new URL(`http://${host}`).host;
  } catch {
    return undefined;
  }
}

const one = (v: string | string[] | undefined) => (Array.isArray(v) ? v[0] : v);

/**
 * Decides browser requests. No `Origin` and no cross-site `Sec-Fetch-Site` (an SDK, curl, an agent, the
 * proxy's own page): served. An `Origin` that is the proxy's own (any scheme, the Host it was reached by)
 * or one configured with `--allow-origin`: served. Any other `Origin` (`null` too): refused. A cross-site
 * or same-site request without an `Origin`: refused, unless it is a GET or HEAD navigation (a link to the
 * live page opens it; a navigation shows the page to the user and gives nothing to the page that linked it).
 */
export class OriginCheck {
  private readonly allowed: Set<string>;

  constructor(allowed: readonly string[] = []) {
    this.allowed = new Set(allowed.map((o) => normalOrigin(o) ?? o.toLowerCase()));
  }

  /** Whether `origin` is a usable `--allow-origin` value: http(s)://host[:port], nothing after. */
  static valid(origin: string): boolean {
    if (normalOrigin(origin) === undefined) return false;
    const u = new URL(origin);
    return u.pathname === '/' && !u.search && !u.hash && !u.username && !u.password;
  }

  check(
    method: string,
    headers: { origin?: string | string[]; host?: string; [k: string]: string | string[] | undefined },
  ): OriginVerdict {
    const origin = one(headers.origin);
    const site = one(headers['sec-fetch-site'])?.toLowerCase();
    if (origin !== undefined) {
      const o = normalOrigin(origin);
      const own = headers.host ? normalHost(headers.host) : undefined;
      if (o && own && o.slice(o.indexOf('//') + 2) === own) return { ok: true };
      if (o && this.allowed.has(o)) return { ok: true };
      return {
        ok: false,
        message: `cacheward proxy: a web page on ${origin.slice(0, 200)} may not send requests through this proxy (a browser's cross-site request; nothing was sent upstream). If that page is an app you run yourself, start the proxy with --allow-origin ${o ?? 'ORIGIN'}`,
      };
    }
    if (site !== 'cross-site' && site !== 'same-site') return { ok: true };
    const navigation = one(headers['sec-fetch-mode'])?.toLowerCase() === 'navigate';
    if (navigation && (method === 'GET' || method === 'HEAD')) return { ok: true };
    return {
      ok: false,
      message: `cacheward proxy: a ${site} browser request without an Origin is refused (a page on another site may be trying to use this proxy; nothing was sent upstream)`,
    };
  }
}
