// Requests the proxy answers itself without reaching the upstream: a Host it does not serve, a browser request
// from another site, a wrong token, an absolute-form target, or a request the HTTP client cannot send.
// Counted as refusals, never as upstream errors.

import type { IncomingMessage, ServerResponse } from 'node:http';
import { errorBody } from '../wire/provider-errors.js';
import type { ProxyMetrics } from './proxy-metrics.js';
import { drainRequest } from './request-drain.js';

/** Why a request was refused (the `reason` label of `cacheward_refused_total`). */
export type RefusalReason = 'host' | 'origin' | 'token' | 'absolute_form' | 'unsendable';

/** What is wrong with a request target, if anything: only origin-form (`/path?query`) is forwarded. */
export function targetProblem(method: string, rawUrl: string): string | undefined {
  if (rawUrl.startsWith('/') && !rawUrl.startsWith('//')) return undefined;
  if (method === 'CONNECT' || rawUrl === '*')
    return `cacheward proxy: ${method} ${rawUrl} is not served; this proxy forwards API requests only (POST /v1/...)`;
  return `cacheward proxy: the request target "${rawUrl.slice(0, 200)}" is in absolute-form; this is not a forward proxy. Send the path only (POST /v1/messages) to this address, with ANTHROPIC_BASE_URL or OPENAI_BASE_URL set to it`;
}

/**
 * Answers `status` with a provider-shaped error and counts it. The rest of the body is dropped (bounded);
 * a client still waiting for `100 Continue` is answered and the connection closed, as it may not send a body.
 */
export function refuse(
  req: IncomingMessage,
  res: ServerResponse,
  o: {
    provider: 'anthropic' | 'openai';
    status: number;
    reason: RefusalReason;
    message: string;
    id: string;
    metrics: ProxyMetrics;
  },
): void {
  o.metrics.refused(o.reason);
  const awaitingContinue = /100-continue/i.test(String(req.headers.expect ?? ''));
  drainRequest(req, res, undefined, awaitingContinue);
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.writeHead(o.status, { 'content-type': 'application/json' });
  const body = errorBody(o.provider, o.status, o.message, o.id);
  // OpenAI's codes name OpenAI's own refusals; this one is the proxy's.
  if ('error' in body && 'code' in body.error) body.error.code = `cacheward_${o.reason}`;
  res.end(JSON.stringify(body));
}

/**
 * When the upstream client refused to send a request (a header it cannot encode, say), what to tell the
 * client; undefined for every failure that happened on the way to or at the upstream.
 */
export function unsendable(err: unknown): string | undefined {
  const code = (err as { code?: unknown }).code;
  if (code !== 'UND_ERR_INVALID_ARG' && code !== 'UND_ERR_NOT_SUPPORTED') return undefined;
  return `cacheward proxy: this request cannot be forwarded as sent (${(err as Error).message}); nothing was sent upstream`;
}
