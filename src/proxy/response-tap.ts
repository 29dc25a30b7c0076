// Watches a response as it streams past: SSE events into the wire's stream reader, or a JSON body kept
// (bounded) for the wire's summarizeResponse. It only observes chunks the client is already getting; it
// never reads a provider's fields itself, never delays or alters a chunk.

import type { Transform } from 'node:stream';
import { createBrotliDecompress, createGunzip, createInflate } from 'node:zlib';
import type { WireFormat } from '../wire/request-body.js';
import { createStreamReader, type StreamReader, type StreamSummary } from '../wire/sse-stream.js';

/** What the tap learned from a response. */
export interface ResponseFacts {
  stream: boolean;
  summary?: StreamSummary;
  json?: Record<string, unknown>;
  bytes: number;
  /** Why the body could not be read (it reached the client regardless). */
  error?: string;
}

const JSON_LIMIT = 64 * 1024 * 1024;

export class ResponseTap {
  private readonly reader: StreamReader | undefined;
  private readonly decoder: Transform | undefined;
  private readonly chunks: Buffer[] = [];
  private kept = 0;
  private bytes = 0;
  private error: string | undefined;
  private readonly stream: boolean;

  constructor(format: WireFormat | undefined, contentType: string | null, contentEncoding: string | null) {
    this.stream = (contentType ?? '').includes('text/event-stream');
    const encoding = (contentEncoding ?? '').trim().toLowerCase();
    if (this.stream && format) this.reader = createStreamReader(format);
    if (encoding && encoding !== 'identity') {
      this.decoder =
        encoding === 'gzip' || encoding === 'x-gzip'
          ? createGunzip()
          : encoding === 'br'
            ? createBrotliDecompress()
            : encoding === 'deflate'
              ? createInflate()
              : undefined;
      if (!this.decoder) this.error = `content-encoding ${encoding} is not read`;
      this.decoder?.on('data', (d: Buffer) => this.take(d));
      this.decoder?.on('error', (e: Error) => {
        this.error = `decompressing the response: ${e.message}`;
      });
    }
  }

  /** A chunk on its way to the client. */
  push(chunk: Buffer): void {
    this.bytes += chunk.length;
    if (this.decoder) this.decoder.write(chunk);
    else this.take(chunk);
  }

  private take(chunk: Buffer): void {
    if (this.reader) {
      try {
        this.reader.push(chunk);
      } catch (err) {
        this.error ??= (err as Error).message;
      }
      return;
    }
    if (this.kept + chunk.length <= JSON_LIMIT) {
      this.chunks.push(chunk);
      this.kept += chunk.length;
    } else this.error ??= 'response body too large to read for usage';
  }

  /** Everything seen so far, read. Call once the body ended (or broke off). */
  async finish(): Promise<ResponseFacts> {
    if (this.decoder) {
      await new Promise<void>((resolve) => {
        this.decoder?.once('end', resolve);
        this.decoder?.once('error', () => resolve());
        this.decoder?.end();
      });
    }
    const facts: ResponseFacts = { stream: this.stream, bytes: this.bytes };
    if (this.reader) {
      try {
        facts.summary = this.reader.end();
      } catch (err) {
        this.error ??= (err as Error).message;
      }
    } else if (this.kept > 0) {
      try {
        const value = JSON.parse(Buffer.concat(this.chunks).toString('utf8'));
        if (value && typeof value === 'object') facts.json = value as Record<string, unknown>;
      } catch {
        this.error ??= 'the response body is not JSON';
      }
    }
    if (this.error) facts.error = this.error;
    return facts;
  }
}
