// Turns a finished exchange into a capture record and metrics: parses the forwarded body into its prefix,
// names the session, reads usage from the response. Runs after the client has its bytes; never throws.

import { type CaptureRecord, capturePrefix, type FixNote, keptHeaders } from '../capture/capture-record.js';
import type { CaptureWriter } from '../capture/capture-writer.js';
import type { Prefix, PrefixBuilder } from '../prefix/build-prefix.js';
import { formatFromRoute } from '../wire/request-body.js';
import type { StreamSummary } from '../wire/sse-stream.js';
import type { ProxyMetrics } from './proxy-metrics.js';
import { type ResponseFacts, ResponseTap } from './response-tap.js';
import { explicitSession, type LineageIndex, type SessionKey } from './session-key.js';

/** Everything known about one exchange once it is over. */
export interface ExchangeFacts {
  id: string;
  provider: 'anthropic' | 'openai' | 'unknown';
  route: string;
  method: string;
  requestHeaders: Headers;
  /** The bytes forwarded upstream, and the client's own when a fix changed them. */
  forwarded: Buffer;
  client?: Buffer;
  /** The prefix of the forwarded body, when the fixes already built it. */
  prefix?: Prefix;
  fixes: FixNote[];
  start: number;
  firstByte?: number;
  end: number;
  status?: number;
  response?: ResponseFacts;
  outcome: CaptureRecord['outcome'];
  error?: string;
}

export interface ExchangeRecorderOptions {
  writer: CaptureWriter;
  metrics: ProxyMetrics;
  builder: PrefixBuilder;
  lineage: LineageIndex;
}

export class ExchangeRecorder {
  constructor(private readonly o: ExchangeRecorderOptions) {}

  /** Builds, writes and counts the record. Any failure here is contained: the exchange already happened. */
  record(f: ExchangeFacts): CaptureRecord {
    const format = formatFromRoute(f.route);
    const record: CaptureRecord = {
      v: 1,
      id: f.id,
      times: { start: f.start, ...(f.firstByte !== undefined ? { firstByte: f.firstByte } : {}), end: f.end },
      session: { key: 'unknown', source: 'lineage' },
      provider: f.provider,
      route: f.route,
      method: f.method,
      outcome: f.outcome,
      stream: f.response?.stream ?? false,
      headers: keptHeaders(f.requestHeaders),
      betas: [],
      requestBytes: f.forwarded.length,
      fixes: f.fixes,
    };
    if (f.status !== undefined) record.status = f.status;
    if (f.error) record.error = f.error;
    if (f.response) record.responseBytes = f.response.bytes;
    let prefix = f.prefix;
    if (!prefix && format && f.forwarded.length) {
      try {
        prefix = this.o.builder.parse(f.forwarded, {
          format,
          headers: { 'anthropic-beta': f.requestHeaders.get('anthropic-beta') ?? undefined },
        });
      } catch (err) {
        record.parseError = (err as Error).message;
      }
    }
    let session: SessionKey | undefined = explicitSession(f.requestHeaders, prefix?.body.fields);
    if (prefix) {
      record.prefix = capturePrefix(prefix);
      record.betas = [...prefix.body.betas];
      if (prefix.model) record.model = prefix.model;
      session ??= { key: this.o.lineage.sessionOf(prefix), source: 'lineage' };
      this.o.lineage.remember(prefix, session.key);
    }
    record.session = session ?? { key: `unparsed-${f.provider}`, source: 'lineage' };
    const summary: Partial<StreamSummary> | undefined = f.response?.summary
      ? f.response.summary
      : f.response?.json
        ? ResponseTap.fromJson(format, f.response.json)
        : undefined;
    if (summary) {
      if (summary.id) record.responseId = summary.id;
      if (summary.stopReason) record.stopReason = summary.stopReason;
      if (summary.usage)
        record.usage = {
          raw: summary.usage,
          ...(summary.normalizedUsage ? { normalized: summary.normalizedUsage } : {}),
        };
      if (summary.diagnostics !== undefined) record.diagnostics = summary.diagnostics;
      if (summary.error && !record.error) record.error = `${summary.error.type}: ${summary.error.message}`;
      if (!record.model && summary.model) record.model = summary.model;
    }
    if (f.response?.error && !record.error) record.error = f.response.error;
    this.o.metrics.record(f.provider, record.model ?? 'unknown', f.status, summary?.normalizedUsage);
    this.o.writer.write(record, { forwarded: f.forwarded, ...(f.client ? { client: f.client } : {}) });
    return record;
  }
}
