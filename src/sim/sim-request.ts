// What a simulator route reads of a request, whether it came over node:http or as a Web Request through
// `sim.fetch`: method, path, headers, the body read whole, whether the client left. Never alters a body.

import type { ResponseStore } from './response-store.js';

/** Header lookup by lower-case name; repeated headers read as one value joined by ", " (as Web Headers). */
export interface HeaderReader {
  get(name: string): string | null;
  has(name: string): boolean;
}

/** Whether the client went away (an AbortSignal is one). */
export interface AbortState {
  readonly aborted: boolean;
}

/** One request as the routes see it. */
export interface SimRequest {
  /** Upper case. */
  readonly method: string;
  /** The URL's path without trailing slashes, as `new URL(...).pathname` spells it. */
  readonly path: string;
  readonly headers: HeaderReader;
  /** The body's bytes, read whole (empty when there is none). */
  body(): Promise<Buffer>;
  /** Drops a body that will not be read (a 413 answered from Content-Length). */
  discard(): Promise<void>;
  readonly signal: AbortState;
  /** A WebSocket's connection-local cache: its latest response, chainable even with `store: false`. */
  readonly local?: ResponseStore;
}

/** The path routes compare against: the pathname without trailing slashes. */
export function routePath(pathname: string): string {
  return pathname.replace(/\/+$/, '');
}

/** A Web Request (from `sim.fetch` or `sim.handle`) as a {@link SimRequest}. */
export function fromWebRequest(request: Request): SimRequest {
  return {
    method: request.method.toUpperCase(),
    path: routePath(new URL(request.url).pathname),
    headers: request.headers,
    body: async () => Buffer.from(await request.arrayBuffer()),
    discard: async () => {
      await request.body?.cancel().catch(() => {});
    },
    signal: request.signal,
  };
}
