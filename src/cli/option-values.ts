// Parsers for option values shared by the commands: ports, counts, seeds, upstream URLs.
// Each either returns a usable value or throws an InputError naming the flag and what to pass instead; never
// a value it had to guess.

import { InputError } from '../core/errors.js';
import { redactUrl } from '../core/redact-url.js';

/** A TCP port, 0 meaning any free one. */
export function parsePort(flag: string, value: string): number {
  const port = /^\d+$/.test(value) ? Number(value) : Number.NaN;
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new InputError(`${flag} ${value}: not a port number; pass 0 to 65535 (0 = any free port)`);
  return port;
}

/** A whole number from `min` up. */
export function parseCount(flag: string, value: string, min = 0): number {
  const n = /^\d+$/.test(value.trim()) ? Number(value) : Number.NaN;
  if (!Number.isSafeInteger(n) || n < min)
    throw new InputError(`${flag} ${value}: not a whole number; pass an integer from ${min}`);
  return n;
}

/** A seed: any safe integer, negative included. */
export function parseSeed(flag: string, value: string): number {
  const n = /^-?\d+$/.test(value.trim()) ? Number(value) : Number.NaN;
  if (!Number.isSafeInteger(n)) throw new InputError(`${flag} ${value}: not an integer; pass e.g. ${flag} 7`);
  return n;
}

/** An upstream base URL: http or https, with a host. Anything else is refused before anything starts. */
export function parseUpstream(flag: string, value: string): string {
  let url: URL | undefined;
  try {
    url = new URL(value);
  } catch {
    url = undefined;
  }
  if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:') || !url.hostname) {
    throw new InputError(
      `${flag} ${redactUrl(value)}: not an http(s) URL with a host; pass e.g. https://api.anthropic.com or http://127.0.0.1:8080`,
    );
  }
  if (url.search || url.hash || url.username || url.password)
    throw new InputError(
      `${flag} ${redactUrl(value)}: a base URL takes no query, fragment or credentials; pass the scheme, host, port and path only`,
    );
  return value;
}

/** Whether an error is a listen() failure because the port is taken. */
export function portInUse(err: unknown): boolean {
  return (err as NodeJS.ErrnoException | undefined)?.code === 'EADDRINUSE';
}

const DURATION_UNITS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** A duration in ms: `0`, or a number with its unit (ms, s, m, h, d), e.g. `30s`, `1h`. */
export function parseDuration(flag: string, value: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$/.exec(value.trim());
  const n = Number(m?.[1]);
  if (!m || !Number.isFinite(n) || (m[2] === undefined && n !== 0))
    throw new InputError(`${flag} ${value}: not a duration; pass e.g. 30s, 15m, 1h or 2d (0 for none)`);
  return n * (DURATION_UNITS[m[2] ?? 'ms'] as number);
}
