// Turns a finished exchange into a capture record and metrics: the forwarded body's prefix (built once, or
// handed over by the fix stage), its conversation (asked of the one resolver), usage from the response.
// Runs after the client has its bytes; never throws.

import type { CaptureWriter } from '../capture/capture-writer.js';
import type { ConversationTracker, TrackedRequest } from '../conversation/conversation-tracker.js';
import { recordedConversation } from '../conversation/conversation-tracker.js';
import { drainSteps } from '../core/steps.js';
import { type Prefix, PrefixBuilder } from '../prefix/build-prefix.js';
import {
  type CaptureRecord,
  capturePrefixSteps,
  type FixNote,
  keptHeaders,
} from '../record/capture-record.js';
import { formatFromRoute } from '../wire/request-body.js';
import { type StreamSummary, summarizeResponse } from '../wire/sse-stream.js';
import { LARGE_BODY_BYTES } from './memory-release.js';
import type { ProxyMetrics } from './proxy-metrics.js';
import { ResponseChains } from './response-chains.js';
import type { ResponseFacts } from './response-tap.js';

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
  /** The prefix of the forwarded body, when the fix stage already built it. */
  prefix?: Prefix;
  /** The conversation the fix stage resolved (and committed) for the client's request. */
  tracked?: TrackedRequest;
  fixes: FixNote[];
  start: number;
  firstByte?: number;
  end: number;
  status?: number;
  response?: ResponseFacts;
  outcome: CaptureRecord['outcome'];
  error?: string;
  /** Why the forwarded body could not be read, once {@link ExchangeRecorder.parse} tried. */
  parseError?: string;
  /** Set for a `response.create` relayed over a WebSocket (websocket-relay.ts). */
  transport?: 'websocket';
}

export interface ExchangeRecorderOptions {
  writer: CaptureWriter;
  metrics: ProxyMetrics;
  builder: PrefixBuilder;
  conversations: ConversationTracker;
}

export class ExchangeRecorder {
  /** Responses chains the proxy saw: a chained request is recorded and resolved whole. */
  readonly chains = new ResponseChains();
  constructor(private readonly o: ExchangeRecorderOptions) {}

  /** Builds the forwarded body's prefix unless the fix stage handed one over (or it was tried already): a
   * step of its own, so the after-response slices can run it apart from the record. */
  parse(f: ExchangeFacts): void {
    drainSteps(this.parseSteps(f));
  }

  /**
   * {@link parse} in bounded steps (the builder's), for the after-response slices to cut a huge body's
   * parse into pieces with other work between them.
   */
  *parseSteps(f: ExchangeFacts): Generator<void, void> {
    const format = formatFromRoute(f.route);
    if (f.prefix || f.parseError !== undefined || !format || !f.forwarded.length) return;
    try {
      // The shared builder keeps its last body to extend from: a huge one gets a builder of its own, so
      // its bytes are not held after the exchange.
      const builder = f.forwarded.length >= LARGE_BODY_BYTES ? new PrefixBuilder() : this.o.builder;
      const prefix = yield* builder.parseSteps(f.forwarded, {
        format,
        headers: { 'anthropic-beta': f.requestHeaders.get('anthropic-beta') ?? undefined },
      });
      // Another step may have parsed it meanwhile (record() parses what is not parsed yet): theirs stands.
      if (!f.prefix && f.parseError === undefined) f.prefix = prefix;
    } catch (err) {
      if (!f.prefix && f.parseError === undefined) f.parseError = (err as Error).message;
    }
  }

  /** Whether a stepped record's conversation commit is half done (a one-step record would finish it first). */
  get busy(): boolean {
    return this.o.conversations.committing;
  }

  /** Builds, writes and counts the record. Any failure here is contained: the exchange already happened. */
  record(f: ExchangeFacts): CaptureRecord {
    return drainSteps(this.recordSteps(f));
  }

  /**
   * {@link record} in bounded steps: the parse, the captured blocks, the message ends and the conversation's
   * resolution and commit (the tracker's `trackSteps`) each yield every few hundred items, so a
   * 100,000-message request is recorded over many slices. The same record, written once at the end.
   */
  *recordSteps(f: ExchangeFacts): Generator<void, CaptureRecord> {
    const format = formatFromRoute(f.route);
    const record: CaptureRecord = {
      v: 1,
      id: f.id,
      times: recordTimes(f),
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
    if (f.transport) record.transport = f.transport;
    if (f.error) record.error = f.error;
    if (f.response) record.responseBytes = f.response.bytes;
    yield* this.parseSteps(f);
    let prefix = f.prefix;
    if (f.parseError) record.parseError = f.parseError;
    const summary: Partial<StreamSummary> | undefined = f.response?.summary
      ? f.response.summary
      : f.response?.json
        ? summarizeResponse(format, f.response.json)
        : undefined;
    let tracked = f.tracked;
    const raw = prefix;
    if (prefix) {
      const whole = this.chains.whole(prefix, summary?.normalizedUsage?.inputTotal);
      prefix = whole.prefix;
      if (whole.chain) record.chain = whole.chain;
      record.prefix = yield* capturePrefixSteps(prefix);
      record.betas = [...prefix.body.betas];
      if (prefix.model) record.model = prefix.model;
      const fields = prefix.body.fields;
      const options = fields.prompt_cache_options as { mode?: unknown } | undefined;
      const retention =
        typeof fields.prompt_cache_retention === 'string' ? fields.prompt_cache_retention : undefined;
      const mode = typeof options?.mode === 'string' ? options.mode : undefined;
      if (retention || mode)
        record.cacheOptions = { ...(retention ? { retention } : {}), ...(mode ? { mode } : {}) };
      const budget = fields.max_completion_tokens ?? fields.max_output_tokens ?? fields.max_tokens;
      if (typeof budget === 'number' && Number.isFinite(budget)) record.maxTokens = budget;
      if (!tracked)
        tracked = yield* this.o.conversations.trackSteps({
          id: f.id,
          prefix,
          headers: f.requestHeaders,
          time: f.start,
          route: f.route,
          status: f.status,
        });
    }
    if (tracked) Object.assign(record, recordedConversation(tracked));
    else record.session = { key: `unparsed-${f.provider}`, source: 'none' };
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
      if (summary.model) record.responseModel = summary.model;
    }
    if (f.response?.error && !record.error) record.error = f.response.error;
    // A stream the upstream ended with an error event (`error`, Responses' `response.failed`) under a 2xx
    // status got no whole answer: the upstream broke off, as it would by dropping the connection.
    if (record.outcome === 'complete' && f.response?.stream && summary?.error)
      record.outcome = 'upstream_error';
    if (raw && summary?.id && record.status !== undefined && record.status < 400) {
      const local = f.transport === 'websocket';
      this.chains.remember(raw, summary.id, outputItems(f, summary), summary.normalizedUsage?.output, local);
      if (tracked) this.o.conversations.answered(tracked, summary.id);
    }
    this.o.metrics.record(f.provider, record.model ?? 'unknown', f.status, summary?.normalizedUsage);
    this.o.writer.write(record, { forwarded: f.forwarded, ...(f.client ? { client: f.client } : {}) });
    return record;
  }
}

/** The record's times, keys in order (set, not spread in before `end`: the slower path on Node 20). */
function recordTimes(f: ExchangeFacts): CaptureRecord['times'] {
  const times = { start: f.start } as CaptureRecord['times'];
  if (f.firstByte !== undefined) times.firstByte = f.firstByte;
  times.end = f.end;
  return times;
}

/** A complete Responses response's output items, from its JSON body or its stream's final response. */
function outputItems(f: ExchangeFacts, summary: Partial<StreamSummary>): unknown[] | undefined {
  const response = f.response?.json ?? (summary.complete ? summary.message : undefined);
  const output = response?.output;
  return f.outcome === 'complete' && Array.isArray(output) ? output : undefined;
}
