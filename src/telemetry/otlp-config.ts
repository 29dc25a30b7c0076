// Where OTLP goes: `--otlp URL` or the standard OTEL_EXPORTER_OTLP_ENDPOINT (and the per-signal
// _TRACES_ / _METRICS_ endpoints). Pure: the environment is a parameter; it never connects.

import { CachewardError } from '../core/errors.js';
import { redactUrl } from '../core/redact-url.js';

/** A `--otlp` value that is not an http(s) URL. */
export class OtlpConfigError extends CachewardError {
  constructor(message: string) {
    super('CW_OTLP_CONFIG', message);
  }
}

export interface OtlpOptions {
  /** The collector's base URL; `/v1/traces` and `/v1/metrics` are added. */
  endpoint: string;
  /** Full URLs per signal (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, …_METRICS_ENDPOINT), when set. */
  tracesUrl?: string;
  metricsUrl?: string;
  /** How often metric points are exported (ms). Default 10,000. */
  metricIntervalMs?: number;
  /** How long finished spans wait to be sent as one batch (ms). Default 1,000. */
  spanDelayMs?: number;
  /** The most one export (with its retries) may take (ms). Default 5,000 (OTEL_EXPORTER_OTLP_TIMEOUT). */
  exportTimeoutMs?: number;
  /** `service.name` (OTEL_SERVICE_NAME). Default `cacheward-proxy`. */
  serviceName?: string;
}

/** The export settings `--otlp` or the environment ask for, or undefined for no export. */
export function otlpOptions(
  option: string | OtlpOptions | undefined,
  env: Readonly<Record<string, string | undefined>> = {},
): OtlpOptions | undefined {
  const given = typeof option === 'string' ? { endpoint: option } : option;
  const endpoint = given?.endpoint ?? env.OTEL_EXPORTER_OTLP_ENDPOINT;
  if (!endpoint) return undefined;
  for (const [what, url] of [
    ['--otlp', endpoint],
    ['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', given?.tracesUrl ?? env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT],
    ['OTEL_EXPORTER_OTLP_METRICS_ENDPOINT', given?.metricsUrl ?? env.OTEL_EXPORTER_OTLP_METRICS_ENDPOINT],
  ] as const) {
    if (url === undefined) continue;
    let u: URL;
    try {
      u = new URL(url);
    } catch {
      throw new OtlpConfigError(
        `${what} ${redactUrl(url)} is not a URL: give the collector's OTLP/HTTP address, e.g. http://127.0.0.1:4318`,
      );
    }
    if (u.protocol !== 'http:' && u.protocol !== 'https:')
      throw new OtlpConfigError(
        `${what} ${redactUrl(url)}: OTLP is exported over HTTP; use an http:// or https:// address (port 4318)`,
      );
  }
  const base = endpoint.replace(/\/+$/, '');
  const interval = Number(env.OTEL_METRIC_EXPORT_INTERVAL);
  const delay = Number(env.OTEL_BSP_SCHEDULE_DELAY);
  const timeout = Number(env.OTEL_EXPORTER_OTLP_TIMEOUT);
  return {
    endpoint: base,
    tracesUrl: given?.tracesUrl ?? env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? `${base}/v1/traces`,
    metricsUrl: given?.metricsUrl ?? env.OTEL_EXPORTER_OTLP_METRICS_ENDPOINT ?? `${base}/v1/metrics`,
    metricIntervalMs: given?.metricIntervalMs ?? (interval > 0 ? interval : 10_000),
    spanDelayMs: given?.spanDelayMs ?? (delay > 0 ? delay : 1_000),
    exportTimeoutMs: given?.exportTimeoutMs ?? (timeout > 0 ? timeout : 5_000),
    serviceName: given?.serviceName ?? env.OTEL_SERVICE_NAME ?? 'cacheward-proxy',
  };
}
