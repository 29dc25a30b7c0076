// Stored Responses for `previous_response_id`: per response id, the whole context a chained request
// continues (earlier input and output items), scoped to the API key. Bounded in count, bytes and time; one
// key never reads another's responses.

import { inputFragment, outputFragment } from '../prefix/chained-prefix.js';
import type { RequestBody } from '../wire/request-body.js';

/** How long a stored response can be chained on: the API keeps responses 30 days. */
export const RESPONSE_RETENTION_MS = 30 * 24 * 60 * 60_000;

/** Options for a {@link ResponseStore}. */
export interface ResponseStoreOptions {
  /** At most this many responses (oldest go first). Default 10,000. */
  maxResponses?: number;
  /** At most this many bytes of stored context in all (oldest go first). Default 256 MB. */
  maxBytes?: number;
}

interface Stored {
  scope: string;
  /** The context as one JSON fragment: input and output items, oldest first, joined by commas. */
  context: Buffer;
  expiresAt: number;
}

/** The responses a simulator stored (`store` not false), by id, oldest first. */
export class ResponseStore {
  private readonly records = new Map<string, Stored>();
  private bytes = 0;
  private readonly maxResponses: number;
  private readonly maxBytes: number;

  constructor(options: ResponseStoreOptions = {}) {
    this.maxResponses = options.maxResponses ?? 10_000;
    this.maxBytes = options.maxBytes ?? 256 * 1024 * 1024;
  }

  /**
   * Keeps response `id`: a request chained on it continues `body`'s input items (for a chained request,
   * its whole body: the context it continued and its own input; see chainedBody) and then `output`.
   */
  put(id: string, scope: string, body: RequestBody, output: readonly unknown[], now: number): void {
    const parts = [inputFragment(body), outputFragment(output)].filter((p) => p.length > 0);
    const joined =
      parts.length === 2
        ? Buffer.concat([parts[0] as Buffer, COMMA, parts[1] as Buffer])
        : Buffer.from(parts[0] ?? '');
    this.records.set(id, { scope, context: joined, expiresAt: now + RESPONSE_RETENTION_MS });
    this.bytes += joined.length;
    if (this.bytes > this.maxBytes || this.records.size > this.maxResponses) this.evict(id);
  }

  /** Drops the oldest responses down to 90% of both bounds at once (amortized O(1); the newest stays). */
  private evict(newest: string): void {
    for (const [oldId, r] of this.records) {
      if (this.bytes <= this.maxBytes * 0.9 && this.records.size <= this.maxResponses * 0.9) break;
      if (oldId === newest) break;
      this.records.delete(oldId);
      this.bytes -= r.context.length;
    }
  }

  /** The context a request chained on `id` continues, or undefined when that id is unknown to this key. */
  context(id: string, scope: string, now: number): Buffer | undefined {
    const r = this.records.get(id);
    return r && r.scope === scope && r.expiresAt > now ? r.context : undefined;
  }

  get size(): number {
    return this.records.size;
  }

  clear(): void {
    this.records.clear();
    this.bytes = 0;
  }
}

const COMMA = Buffer.from(',');
