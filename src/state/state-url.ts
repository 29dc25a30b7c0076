// Reads `--state`: `memory` (the default) or `redis://[USER:PASSWORD@]HOST:PORT[/DB]` (`rediss://` for TLS).
// Pure parsing with precise messages; it never connects, and never puts a password in a message.

import { CachewardError } from '../core/errors.js';
import { redactUrl as redact } from '../core/redact-url.js';

/** A `--state` value that cannot be used. */
export class StateConfigError extends CachewardError {
  constructor(message: string) {
    super('CW_STATE_CONFIG', message);
  }
}

export type StateSpec =
  | { kind: 'memory' }
  | {
      kind: 'redis';
      host: string;
      port: number;
      db: number;
      tls: boolean;
      username?: string;
      password?: string;
      /** The address as shown in health and logs: no credentials. */
      display: string;
    };

const HELP = 'use --state memory or --state redis://HOST:PORT[/DB]';

export function parseStateSpec(text: string | undefined): StateSpec {
  if (text === undefined || text === '' || text === 'memory') return { kind: 'memory' };
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new StateConfigError(`--state ${JSON.stringify(redact(text))} is not a URL: ${HELP}`);
  }
  if (url.protocol !== 'redis:' && url.protocol !== 'rediss:')
    throw new StateConfigError(`--state ${url.protocol}// is not supported: ${HELP}`);
  if (!url.hostname) throw new StateConfigError(`--state ${redact(text)} names no host: ${HELP}`);
  const port = url.port === '' ? 6379 : Number(url.port);
  const dbText = url.pathname.replace(/^\/+/, '');
  const db = dbText === '' ? 0 : Number(dbText);
  if (!Number.isInteger(db) || db < 0 || db > 15 || !/^\d*$/.test(dbText))
    throw new StateConfigError(`--state ${redact(text)}: database "${dbText}" is not a number from 0 to 15`);
  const host = url.hostname.replace(/^\[|\]$/g, '');
  return {
    kind: 'redis',
    host,
    port,
    db,
    tls: url.protocol === 'rediss:',
    ...(url.username ? { username: decodeURIComponent(url.username) } : {}),
    ...(url.password ? { password: decodeURIComponent(url.password) } : {}),
    display: `${url.protocol}//${url.hostname}:${port}/${db}`,
  };
}
