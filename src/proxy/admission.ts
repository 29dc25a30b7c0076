// The checks every request passes before the proxy does anything with it: an origin-form target, a Host it
// serves, no browser request from another site, the token when one is set. A request that fails one is answered here and never reaches the upstream.

import { timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { continueIfExpected } from './expect-continue.js';
import type { HostCheck } from './host-check.js';
import { refuse, targetProblem } from './local-refusal.js';
import type { OriginCheck } from './origin-check.js';
import type { ProxyMetrics } from './proxy-metrics.js';

export interface AdmissionOptions {
  hosts: HostCheck;
  /** Browser requests: the proxy's own pages and the origins allowed with `--allow-origin`. */
  origins: OriginCheck;
  token?: string | undefined;
  metrics: ProxyMetrics;
}

export class Admission {
  private readonly token: Buffer | undefined;

  constructor(private readonly o: AdmissionOptions) {
    this.token = o.token ? Buffer.from(o.token) : undefined;
  }

  /** True when the request may go on (a waiting client has been sent `100 Continue`); else it was answered. */
  admit(req: IncomingMessage, res: ServerResponse, provider: 'anthropic' | 'openai', id: string): boolean {
    const method = (req.method ?? 'GET').toUpperCase();
    const base = { provider, id, metrics: this.o.metrics };
    const problem = targetProblem(method, req.url ?? '/');
    if (problem) {
      refuse(req, res, { ...base, status: 400, reason: 'absolute_form', message: problem });
      return false;
    }
    if (!this.o.hosts.allows(req.headers.host)) {
      refuse(req, res, {
        ...base,
        status: 403,
        reason: 'host',
        message: this.o.hosts.refusal(req.headers.host),
      });
      return false;
    }
    const browser = this.o.origins.check(method, req.headers);
    if (!browser.ok) {
      refuse(req, res, { ...base, status: 403, reason: 'origin', message: browser.message });
      return false;
    }
    if (!this.tokenMatches(req)) {
      refuse(req, res, {
        ...base,
        status: 401,
        reason: 'token',
        message: 'cacheward proxy: missing or wrong x-cacheward-token',
      });
      return false;
    }
    continueIfExpected(req, res);
    return true;
  }

  private tokenMatches(req: IncomingMessage): boolean {
    if (!this.token) return true;
    return sameToken(req.headers['x-cacheward-token'], this.token);
  }
}

/** Whether a token given by a client is `token`, compared in constant time (no timing tells how much matched). */
export function sameToken(given: unknown, token: Buffer): boolean {
  const g = Buffer.from(typeof given === 'string' ? given : '');
  return g.length === token.length && timingSafeEqual(g, token);
}
