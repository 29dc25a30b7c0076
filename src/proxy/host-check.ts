// Which Host headers the proxy answers: loopback names, IP literals and the names it was told about, so a page
// on another origin that rebinds its DNS name to 127.0.0.1 cannot read the proxy or send through it.

import { isIP } from 'node:net';

/**
 * The host name of a Host header value, lower-cased, without port or IPv6 brackets; undefined when the
 * value is not a host[:port].
 */
export function hostName(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const value = header.trim().toLowerCase();
  if (value.startsWith('[')) {
    const end = value.indexOf(']');
    if (end < 0) return undefined;
    const rest = value.slice(end + 1);
    if (rest && !/^:\d{1,5}$/.test(rest)) return undefined;
    return value.slice(1, end);
  }
  const m = value.match(/^([^:]+)(?::\d{1,5})?$/);
  return m?.[1]?.replace(/\.$/, '');
}

/**
 * Decides Host headers. An IP literal cannot be rebound (a page served from that address is that origin), and
 * `localhost` and `*.localhost` always resolve to loopback; any other name must be configured.
 */
export class HostCheck {
  private readonly names: Set<string>;

  constructor(configured: readonly string[] = []) {
    this.names = new Set(configured.map((n) => hostName(n) ?? n.toLowerCase()));
  }

  allows(header: string | undefined): boolean {
    const name = hostName(header);
    if (name === undefined) return false;
    if (isIP(name)) return true;
    if (name === 'localhost' || name.endsWith('.localhost')) return true;
    return this.names.has(name);
  }

  /** What the client is told when its Host is refused. */
  refusal(header: string | undefined): string {
    const name = hostName(header) ?? header ?? '';
    return `cacheward proxy: Host "${name}" is not allowed (a page on another site may be trying to reach this proxy through DNS rebinding). If you meant to reach the proxy under that name, start it with --allow-host ${name || 'NAME'}`;
  }
}
