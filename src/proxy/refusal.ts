// Whether the upstream refused a request a fix changed, so the client's own bytes go out instead: Anthropic's
// 400 `invalid_request_error`, OpenAI's 400 or 422, or a 413 when a fix made the body larger. Reads only such
// an error body (bounded); never a success, a 401/403/429/5xx, or any other status.

import type { Readable } from 'node:stream';
import { brotliDecompressSync, gunzipSync, inflateSync } from 'node:zlib';
import type { UpstreamProvider } from './forward-headers.js';

/** An error body larger than this is not a refusal the proxy reads (it goes to the client as it is). */
export const MAX_ERROR_BYTES = 256 * 1024;

/** The upstream's answer as the forwarder holds it (undici's response data). */
export interface UpstreamAnswer {
  statusCode: number;
  headers: Record<string, string | string[] | undefined>;
  body: Readable;
}

/**
 * Reads the answer's body when its status may be a refusal: `refusal` is the provider's message when it is
 * one. `head` is what was read of the body (to send on as it is when it is not); the rest stays unread.
 */
export async function readRefusal(
  provider: UpstreamProvider,
  upstream: UpstreamAnswer,
  grew: boolean,
): Promise<{ refusal?: string; head: Buffer[] }> {
  const status = upstream.statusCode;
  if (!mayRefuse(provider, status, grew)) return { head: [] };
  const head: Buffer[] = [];
  let size = 0;
  for await (const chunk of upstream.body.iterator({ destroyOnReturn: false })) {
    head.push(chunk as Buffer);
    size += (chunk as Buffer).length;
    if (size > MAX_ERROR_BYTES) return { head };
  }
  const refusal = refusalIn(provider, status, Buffer.concat(head), upstream.headers['content-encoding']);
  return refusal === undefined ? { head } : { refusal, head };
}

/** Whether an answer with this status may be a refusal of a fixed request (then its body is read). */
export function mayRefuse(provider: UpstreamProvider, status: number, grew: boolean): boolean {
  return status === 400 || (status === 422 && provider === 'openai') || (status === 413 && grew);
}

/**
 * The provider's message when an error body (all of it, at most {@link MAX_ERROR_BYTES}, as sent: `encoding` is
 * its content-encoding) refuses the request; undefined when it is another error.
 */
export function refusalIn(
  provider: UpstreamProvider,
  status: number,
  raw: Buffer,
  encoding: string | string[] | undefined,
): string | undefined {
  const error = errorOf(raw, encoding);
  if (provider === 'anthropic') {
    const refused =
      (status === 400 && error?.type === 'invalid_request_error') ||
      (status === 413 && error?.type === 'request_too_large');
    return refused ? String(error?.message ?? '') : undefined;
  }
  return typeof error?.message === 'string' ? error.message : `HTTP ${status}`;
}

/** The `error` object of a provider's error body, decoded as sent; undefined when it has none. */
function errorOf(
  raw: Buffer,
  encoding: string | string[] | undefined,
): { type?: unknown; message?: unknown } | undefined {
  try {
    const how = String(Array.isArray(encoding) ? encoding[0] : (encoding ?? ''))
      .trim()
      .toLowerCase();
    const text =
      how === 'gzip' || how === 'x-gzip'
        ? gunzipSync(raw)
        : how === 'br'
          ? brotliDecompressSync(raw)
          : how === 'deflate'
            ? inflateSync(raw)
            : raw;
    const body = JSON.parse(text.toString('utf8')) as { error?: unknown };
    return body.error && typeof body.error === 'object' ? (body.error as { type?: unknown }) : undefined;
  } catch {
    return undefined;
  }
}
