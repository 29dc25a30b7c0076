// Resolves ProxyOptions into the settings the proxy runs with: the address check, upstream URLs, the fixes in
// run order, the clock and the logger. It must never open a socket, a file or a state store.

import type { Clock } from '../core/clock.js';
import type { ListenOptions } from '../core/listen.js';
import { type LoggerChannels, lineLogger, loggerChannels } from '../core/logger.js';
import { redactUrl } from '../core/redact-url.js';
import type { Fix } from '../fixes/fix.js';
import { fixRegistry } from '../fixes/registry.js';
import type { LiveRequest } from './live-analysis.js';
import { OriginCheck } from './origin-check.js';
import {
  DEFAULT_ANTHROPIC_UPSTREAM,
  DEFAULT_OPENAI_UPSTREAM,
  ProxyConfigError,
  type ProxyOptions,
} from './proxy-options.js';

const LOOPBACK = new Set(['127.0.0.1', '::1', 'localhost']);
const SYSTEM_CLOCK: Clock = { now: () => Date.now() };

export interface ProxyConfig {
  clock: Clock;
  logger: LoggerChannels<LiveRequest>;
  /** What the proxy's parts report (capture, state, fixes): the logger's `warn`. */
  log: (line: string) => void;
  upstreams: { anthropic: string; openai: string };
  /** Named fixes in the registry's order, then fix objects. */
  fixes: Fix[];
}

/** The address to bind; throws ProxyConfigError for one beyond loopback without a token. */
export function listenHost(at: ListenOptions, options: Pick<ProxyOptions, 'token'>): string {
  const host = at.host ?? '127.0.0.1';
  if (!LOOPBACK.has(host) && !options.token) {
    throw new ProxyConfigError(
      `binding to ${host} exposes your credentials to that network: pass --token (and send it as x-cacheward-token), or bind 127.0.0.1`,
    );
  }
  return host;
}

/** Throws ProxyConfigError, naming what to change, for an upstream that cannot be served. */
export function resolveProxyConfig(options: ProxyOptions): ProxyConfig {
  const logger = loggerChannels(
    options.logger,
    lineLogger<LiveRequest>('cacheward proxy', (line) => process.stderr.write(`${line}\n`)),
  );
  const log = (line: string) => logger.warn(line);
  const upstreams = {
    anthropic: (options.anthropicUpstream ?? options.upstream ?? DEFAULT_ANTHROPIC_UPSTREAM).replace(
      /\/+$/,
      '',
    ),
    openai: (options.openaiUpstream ?? options.upstream ?? DEFAULT_OPENAI_UPSTREAM).replace(/\/+$/, ''),
  };
  for (const u of Object.values(upstreams)) {
    try {
      new URL(u);
    } catch {
      throw new ProxyConfigError(
        `upstream ${redactUrl(u)} is not a URL (e.g. https://api.anthropic.com or http://127.0.0.1:8080)`,
      );
    }
  }
  for (const o of options.allowedOrigins ?? [])
    if (!OriginCheck.valid(o))
      throw new ProxyConfigError(
        `allowed origin ${redactUrl(o)} is not a web origin: give the scheme, host and port only, e.g. http://localhost:5173`,
      );
  // In the registry's order; a fix object takes the place of the built-in of its name (ttlFix('5m')).
  const fixes = (options.registry ?? fixRegistry()).resolve(options.fixes ?? []);
  return { clock: options.clock ?? SYSTEM_CLOCK, logger, log, upstreams, fixes };
}
