// What the capture writer remembers per session to store the next record as a delta: the last body, prefix
// blocks and headers. Bounded: least recently used sessions go first, and a huge body is never kept.

import type { CapturedBlock, CapturedPrefix } from '../record/capture-record.js';

export interface SessionBase {
  body?: { id: string; body: Uint8Array };
  blocks?: { id: string; blocks: CapturedBlock[]; params: CapturedPrefix['params'] };
  headers?: string;
}

export interface SessionBaseLimits {
  /** Sessions remembered (default 256). */
  maxSessions: number;
  /** Bytes of bodies kept across all sessions (default 64 MB). */
  maxBodyBytes: number;
  /** A body larger than this is not kept: the next one of its session is stored whole (default 8 MB). */
  maxOneBody: number;
}

export const DEFAULT_BASE_LIMITS: SessionBaseLimits = {
  maxSessions: 256,
  maxBodyBytes: 64 * 1024 * 1024,
  maxOneBody: 8 * 1024 * 1024,
};

export class SessionBases {
  private readonly map = new Map<string, SessionBase>();
  private bodyBytes = 0;

  constructor(private readonly limits: SessionBaseLimits = DEFAULT_BASE_LIMITS) {}

  get(session: string): SessionBase | undefined {
    return this.map.get(session);
  }

  /** Replaces what is known of a session (fields left out are kept), making it the most recent. */
  set(session: string, next: SessionBase): void {
    const prev = this.map.get(session);
    // Field by field (on Node 20 a spread that adds keys takes a slow runtime path).
    const body =
      next.body && next.body.body.length > this.limits.maxOneBody ? undefined : (next.body ?? prev?.body);
    const blocks = next.blocks ?? prev?.blocks;
    const headers = next.headers ?? prev?.headers;
    const merged: SessionBase = {};
    if (body) merged.body = body;
    if (blocks) merged.blocks = blocks;
    if (headers !== undefined) merged.headers = headers;
    this.bodyBytes += (merged.body?.body.length ?? 0) - (prev?.body?.body.length ?? 0);
    this.map.delete(session);
    this.map.set(session, merged);
    for (const [key, base] of this.map) {
      if (this.map.size <= this.limits.maxSessions && this.bodyBytes <= this.limits.maxBodyBytes) break;
      if (key === session && this.map.size === 1) break;
      this.bodyBytes -= base.body?.body.length ?? 0;
      this.map.delete(key);
    }
  }

  clear(): void {
    this.map.clear();
    this.bodyBytes = 0;
  }

  get size(): number {
    return this.map.size;
  }
}
