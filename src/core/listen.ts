// The one start/stop shape of cacheward's servers (the proxy and the simulator): where to listen, and the
// errors for using a server before it listens or starting it twice. Types and errors only: it never opens a socket.

import { CachewardError } from './errors.js';

/** Where a server listens. Both default to an ephemeral port on 127.0.0.1. */
export interface ListenOptions {
  /** 0 (default) = any free port. */
  port?: number;
  /** Default `127.0.0.1`; anything but loopback needs a token on the proxy. */
  host?: string;
}

/** What the proxy and the simulator share: `await x.listen()`, then `x.url`, then `await x.close()`. */
export interface Listening {
  /** Starts HTTP; resolves to the base URL (`http://127.0.0.1:PORT`) once listening. */
  listen(at?: ListenOptions): Promise<string>;
  /** The base URL. Throws `CW_NOT_LISTENING` before `listen()` resolves and after `close()`. */
  readonly url: string;
  /** Stops listening and releases everything; safe to call twice or before `listen()`. */
  close(): Promise<void>;
}

/** `url` (or another listening-only call) was used before `listen()` resolved or after `close()`. */
export class NotListeningError extends CachewardError {
  constructor(what: string) {
    super('CW_NOT_LISTENING', `the ${what} is not listening: await ${what}.listen() first`);
  }
}

/** `listen()` was called on a server that is already listening (or, for the proxy, was closed). */
export class AlreadyListeningError extends CachewardError {
  constructor(what: string, detail: string) {
    super('CW_ALREADY_LISTENING', `the ${what} ${detail}`);
  }
}
