// Which headers cross the proxy, in each direction, and which upstream a request is for.
// It must never forward hop-by-hop headers or cacheward's own `x-cacheward-*` headers upstream.

import type { IncomingMessage } from 'node:http';

const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'transfer-encoding',
  'te',
  'trailer',
  'upgrade',
  'host',
  // Answered by the proxy itself (expect-continue.ts); the upstream client cannot send it.
  'expect',
]);

export type UpstreamProvider = 'anthropic' | 'openai';

/** The upstream a request goes to: by route, then by the headers each provider's SDK sends. */
export function upstreamOf(path: string, headers: IncomingMessage['headers']): UpstreamProvider {
  if (path.startsWith('/v1/messages')) return 'anthropic';
  if (path.startsWith('/v1/chat') || path.startsWith('/v1/responses')) return 'openai';
  return headers['x-api-key'] || headers['anthropic-version'] ? 'anthropic' : 'openai';
}

/** The client's headers as sent upstream, with a fix's header changes applied. */
export function forwardHeaders(
  raw: IncomingMessage['headers'],
  override?: Record<string, string>,
): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(raw)) {
    if (value === undefined || HOP_BY_HOP.has(name) || name.startsWith('x-cacheward-')) continue;
    out[name] = value;
  }
  if (override) Object.assign(out, override);
  return out;
}

/** The upstream's response headers as sent to the client. */
export function responseHeaders(
  raw: Record<string, string | string[] | undefined>,
): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(raw)) {
    if (value === undefined || HOP_BY_HOP.has(name)) continue;
    out[name] = value;
  }
  return out;
}

/** The client's headers as web Headers (what the capture and the fixes read). */
export function webHeaders(raw: IncomingMessage['headers']): Headers {
  const h = new Headers();
  for (const [name, value] of Object.entries(raw)) {
    if (value === undefined) continue;
    for (const v of Array.isArray(value) ? value : [value]) h.append(name, v);
  }
  return h;
}
