// OTLP/HTTP export with the official OpenTelemetry JS SDK: a span and metric points per analyzed request,
// batched and sent on the SDK's own timers. Never on the request path; a collector that is down costs
// the proxy only a count of dropped spans and points.

import { randomUUID } from 'node:crypto';
import { type Counter, type Histogram, SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { type ExportResult, ExportResultCode } from '@opentelemetry/core';
import { OTLPMetricExporter } from '@opentelemetry/exporter-metrics-otlp-http';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  MeterProvider,
  PeriodicExportingMetricReader,
  type PushMetricExporter,
  type ResourceMetrics,
} from '@opentelemetry/sdk-metrics';
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  type ReadableSpan,
  type SpanExporter,
} from '@opentelemetry/sdk-trace-base';
import { PriceTable } from '../analyze/price-table.js';
import { redactUrl } from '../core/redact-url.js';
import { VERSION } from '../core/version.js';

import { BoundedLabel } from './bounded-labels.js';
import {
  type ExportedRequest,
  isChatCall,
  type ServerAddress,
  serverAddress,
  spanAttributes,
  spanName,
} from './genai-attributes.js';
import type { OtlpOptions } from './otlp-config.js';

/**
 * This process's `service.instance.id` (a random UUID, as the conventions advise): one per process, so a
 * backend tells a fleet's proxies apart; on `/_cacheward/health` as `otlp.instance`.
 */
export const SERVICE_INSTANCE_ID = randomUUID();

/** What `/_cacheward/health` says about the export. */
export interface OtlpHealth {
  endpoint: string;
  /** The `service.instance.id` the export carries. */
  instance: string;
  /** Spans and metric points the collector accepted, and those dropped (collector down, queue full). */
  exported: number;
  dropped: number;
}

const QUEUE = 2_048;
/** The conventions' advised buckets for gen_ai.client.token.usage. */
const TOKEN_BUCKETS = [
  1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864,
];
const DURATION_BUCKETS = [
  0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
];

interface Counts {
  exportedSpans: number;
  droppedSpans: number;
  exportedPoints: number;
  droppedPoints: number;
  /** Spans handed to the batch processor and not yet taken into an export. */
  queued: number;
  /** Spans in an export the collector has not answered yet. */
  sending: number;
  /** Stopped without waiting for the collector: what it answers later is no longer counted. */
  abandoned: boolean;
}

const ok = (r: ExportResult) => r.code === ExportResultCode.SUCCESS;

/** The SDK's span exporter, counting what it sent and what a failed export lost. */
class CountingSpanExporter implements SpanExporter {
  constructor(
    private readonly inner: SpanExporter,
    private readonly counts: Counts,
  ) {}
  export(spans: ReadableSpan[], done: (r: ExportResult) => void): void {
    this.counts.queued = Math.max(0, this.counts.queued - spans.length);
    this.counts.sending += spans.length;
    this.inner.export(spans, (r) => {
      if (this.counts.abandoned) return done(r);
      this.counts.sending -= spans.length;
      if (ok(r)) this.counts.exportedSpans += spans.length;
      else this.counts.droppedSpans += spans.length;
      done(r);
    });
  }
  shutdown(): Promise<void> {
    return this.inner.shutdown();
  }
  forceFlush(): Promise<void> {
    return this.inner.forceFlush?.() ?? Promise.resolve();
  }
}

const pointsIn = (m: ResourceMetrics) =>
  m.scopeMetrics.reduce((n, s) => n + s.metrics.reduce((k, x) => k + x.dataPoints.length, 0), 0);

/** The SDK's metric exporter, counting points sent and points a failed export lost. */
class CountingMetricExporter implements PushMetricExporter {
  selectAggregationTemporality?: PushMetricExporter['selectAggregationTemporality'];
  selectAggregation?: PushMetricExporter['selectAggregation'];
  constructor(
    private readonly inner: PushMetricExporter,
    private readonly counts: Counts,
  ) {
    if (inner.selectAggregationTemporality)
      this.selectAggregationTemporality = inner.selectAggregationTemporality.bind(inner);
    if (inner.selectAggregation) this.selectAggregation = inner.selectAggregation.bind(inner);
  }
  export(metrics: ResourceMetrics, done: (r: ExportResult) => void): void {
    const n = pointsIn(metrics);
    this.inner.export(metrics, (r) => {
      if (ok(r)) this.counts.exportedPoints += n;
      else this.counts.droppedPoints += n;
      done(r);
    });
  }
  forceFlush(): Promise<void> {
    return this.inner.forceFlush();
  }
  shutdown(): Promise<void> {
    return this.inner.shutdown();
  }
}

export class OtlpTelemetry {
  private readonly counts: Counts = {
    exportedSpans: 0,
    droppedSpans: 0,
    exportedPoints: 0,
    droppedPoints: 0,
    queued: 0,
    sending: 0,
    abandoned: false,
  };
  private readonly tracerProvider: BasicTracerProvider;
  private readonly meterProvider: MeterProvider;
  private readonly models: BoundedLabel;
  private readonly instruments: {
    tokenUsage: Histogram;
    duration: Histogram;
    requests: Counter;
    tokens: Counter;
    misses: Counter;
    rewritten: Counter;
    waste: Counter;
  };
  /** Per provider and model: tokens read and all input tokens, for the hit ratio gauge. */
  private readonly ratio = new Map<
    string,
    { provider: string; model: string; read: number; input: number }
  >();

  /** Each provider's upstream as `server.address` and `server.port`. */
  private readonly servers: Partial<Record<string, ServerAddress>> = {};

  /** `upstreams`: each provider's base URL, for the spans' `server.address` and `server.port`. */
  constructor(
    private readonly options: OtlpOptions,
    private readonly log: (line: string) => void = () => {},
    upstreams: Partial<Record<'anthropic' | 'openai', string>> = {},
  ) {
    for (const [provider, base] of Object.entries(upstreams)) {
      const s = base === undefined ? undefined : serverAddress(base);
      if (s) this.servers[provider] = s;
    }
    const resource = resourceFromAttributes({
      'service.name': options.serviceName ?? 'cacheward-proxy',
      'service.version': VERSION,
      'service.instance.id': SERVICE_INSTANCE_ID,
    });
    const prices = new PriceTable();
    // A model priced from another row keeps its own name (only its own row's dated variants fold into it).
    this.models = new BoundedLabel((m) => {
      const p = prices.lookup(m);
      return p && p.nearestFor === undefined ? p.model : undefined;
    });
    this.tracerProvider = new BasicTracerProvider({
      resource,
      spanProcessors: [
        new BatchSpanProcessor(
          new CountingSpanExporter(
            new OTLPTraceExporter({
              url: options.tracesUrl ?? `${options.endpoint}/v1/traces`,
              timeoutMillis: options.exportTimeoutMs ?? 5_000,
            }),
            this.counts,
          ),
          {
            maxQueueSize: QUEUE,
            maxExportBatchSize: 512,
            scheduledDelayMillis: options.spanDelayMs ?? 1_000,
          },
        ),
      ],
    });
    this.meterProvider = new MeterProvider({
      resource,
      readers: [
        new PeriodicExportingMetricReader({
          exporter: new CountingMetricExporter(
            new OTLPMetricExporter({
              url: options.metricsUrl ?? `${options.endpoint}/v1/metrics`,
              timeoutMillis: options.exportTimeoutMs ?? 5_000,
            }),
            this.counts,
          ),
          exportIntervalMillis: options.metricIntervalMs ?? 10_000,
          exportTimeoutMillis: options.exportTimeoutMs ?? 5_000,
        }),
      ],
    });
    const meter = this.meterProvider.getMeter('cacheward', VERSION);
    this.instruments = {
      tokenUsage: meter.createHistogram('gen_ai.client.token.usage', {
        unit: '{token}',
        description: 'Input and output tokens per request',
        advice: { explicitBucketBoundaries: TOKEN_BUCKETS },
      }),
      duration: meter.createHistogram('gen_ai.client.operation.duration', {
        unit: 's',
        description: 'Request duration through the proxy',
        advice: { explicitBucketBoundaries: DURATION_BUCKETS },
      }),
      requests: meter.createCounter('cacheward.requests', {
        description: 'Requests, by relation and status',
      }),
      tokens: meter.createCounter('cacheward.tokens', {
        unit: '{token}',
        description: 'Tokens by kind: read from cache, written to cache, uncached input, output',
      }),
      misses: meter.createCounter('cacheward.misses', { description: 'Cache misses, by cause' }),
      rewritten: meter.createCounter('cacheward.rewritten_tokens', {
        unit: '{token}',
        description: 'Tokens written again that had been cached before, by cause',
      }),
      waste: meter.createCounter('cacheward.waste', {
        unit: 'USD',
        description: 'What re-written tokens cost beyond reading them, by cause',
      }),
    };
    meter
      .createObservableGauge('cacheward.cache.hit_ratio', {
        unit: '1',
        description: 'Token-weighted: tokens read from cache over all input tokens, since start',
      })
      .addCallback((obs) => {
        for (const r of this.ratio.values())
          if (r.input > 0)
            obs.observe(r.read / r.input, {
              'gen_ai.provider.name': r.provider,
              'gen_ai.request.model': r.model,
            });
      });
  }

  /** Records one analyzed request as a span and metric points; the SDK sends them later, batched. */
  export(e: ExportedRequest): void {
    if (!isChatCall(e)) return;
    const { record: r, analyzed: a } = e;
    const model = this.models.of(r.model);
    const base = {
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': r.provider,
      'gen_ai.request.model': model,
    };
    const statusClass = r.status === undefined ? 'none' : `${Math.floor(r.status / 100)}xx`;
    this.instruments.requests.add(1, {
      ...base,
      'cacheward.conversation.relation': a.relation,
      'http.response.status_class': statusClass,
    });
    this.instruments.duration.record(
      Math.max(0, ((r.times.end ?? r.times.start) - r.times.start) / 1000),
      base,
    );
    const u = a.usage;
    if (u) {
      this.instruments.tokenUsage.record(u.inputTotal, { ...base, 'gen_ai.token.type': 'input' });
      this.instruments.tokenUsage.record(u.output, { ...base, 'gen_ai.token.type': 'output' });
      const kinds: Array<[string, number]> = u.cacheReported
        ? [
            ['read', u.cacheRead],
            ['written', u.cacheWrite],
            ['uncached', u.uncached],
            ['output', u.output],
          ]
        : [
            ['uncached', u.inputTotal],
            ['output', u.output],
          ];
      for (const [kind, n] of kinds)
        if (n > 0) this.instruments.tokens.add(n, { ...base, 'cacheward.token.kind': kind });
      if (u.cacheReported) {
        const key = `${r.provider}\u0000${model}`;
        const cur = this.ratio.get(key) ?? { provider: r.provider, model, read: 0, input: 0 };
        cur.read += u.cacheRead;
        cur.input += u.inputTotal;
        this.ratio.set(key, cur);
      }
    }
    if (a.miss) {
      const withCause = { ...base, 'cacheward.miss.cause': a.miss.cause };
      this.instruments.misses.add(1, withCause);
      if (a.miss.rewrittenTokens > 0) this.instruments.rewritten.add(a.miss.rewrittenTokens, withCause);
      if (a.miss.waste) this.instruments.waste.add(a.miss.waste, withCause);
    }
    if (this.counts.queued >= QUEUE) {
      // The batch processor's queue is full (the collector is slow or down): this span is dropped, counted.
      this.counts.droppedSpans++;
      return;
    }
    this.counts.queued++;
    const span = this.tracerProvider.getTracer('cacheward', VERSION).startSpan(spanName(e), {
      kind: SpanKind.CLIENT,
      startTime: r.times.start,
      attributes: spanAttributes(e, this.servers[r.provider]),
    });
    if (r.status !== undefined && r.status >= 400)
      span.setStatus({ code: SpanStatusCode.ERROR, message: `HTTP ${r.status}` });
    else if (r.outcome !== 'complete') span.setStatus({ code: SpanStatusCode.ERROR, message: r.outcome });
    span.end(r.times.end ?? r.times.start);
  }

  health(): OtlpHealth {
    const c = this.counts;
    return {
      endpoint: redactUrl(this.options.endpoint),
      instance: SERVICE_INSTANCE_ID,
      exported: c.exportedSpans + c.exportedPoints,
      dropped: c.droppedSpans + c.droppedPoints,
    };
  }

  metricsText(): string {
    const c = this.counts;
    return [
      '# HELP cacheward_otlp_exported_total Spans and metric points the OTLP collector accepted.',
      '# TYPE cacheward_otlp_exported_total counter',
      `cacheward_otlp_exported_total{signal="traces"} ${c.exportedSpans}`,
      `cacheward_otlp_exported_total{signal="metrics"} ${c.exportedPoints}`,
      '# HELP cacheward_otlp_dropped_total Spans and metric points dropped: collector down or queue full.',
      '# TYPE cacheward_otlp_dropped_total counter',
      `cacheward_otlp_dropped_total{signal="traces"} ${c.droppedSpans}`,
      `cacheward_otlp_dropped_total{signal="metrics"} ${c.droppedPoints}`,
      '',
    ].join('\n');
  }

  /** Sends what is pending now (spans and a metric collection). */
  async flush(): Promise<void> {
    await Promise.allSettled([this.tracerProvider.forceFlush(), this.meterProvider.forceFlush()]);
  }

  /**
   * Sends what is pending and stops, waiting for the collector `budgetMs` at most (default 1,000): spans
   * still unsent then are dropped, counted, and said in one line. Resolves with how many were dropped.
   */
  async shutdown(budgetMs = 1_000): Promise<number> {
    const stopped = Promise.allSettled([this.tracerProvider.shutdown(), this.meterProvider.shutdown()]);
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => {
      timer = setTimeout(() => resolve('late'), budgetMs);
    });
    const outcome = await Promise.race([stopped, late]);
    clearTimeout(timer);
    if (outcome !== 'late') return 0;
    const c = this.counts;
    const unsent = c.queued + c.sending;
    c.droppedSpans += unsent;
    c.queued = 0;
    c.sending = 0;
    c.abandoned = true;
    this.log(
      `OTLP: the collector at ${redactUrl(this.options.endpoint)} did not take the last export within ${budgetMs} ms of the stop; ${unsent} span${unsent === 1 ? '' : 's'} not sent ${unsent === 1 ? 'was' : 'were'} dropped (and the last metric points with them)`,
    );
    return unsent;
  }
}
