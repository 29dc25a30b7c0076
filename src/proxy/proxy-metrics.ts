// Counters for GET /_cacheward/metrics in the Prometheus text format: requests, tokens read / written /
// uncached, token-weighted hit ratio, upstream errors and local refusals. Memory only, bounded label sets.

import { capLabel } from '../core/cap-label.js';
import type { NormalizedUsage } from '../wire/usage.js';

interface Series {
  requests: Map<string, number>;
  read: number;
  written: number;
  uncached: number;
  notReported: number;
}

/** A miss counted by cause: the closed vocabulary and two providers keep this label set bounded. */
interface MissSeries {
  misses: number;
  rewritten: number;
  waste: number;
}

/** The label value every model past the cap is counted under. */
export const OTHER_MODEL = 'other';

const PROVIDERS = new Set(['anthropic', 'openai', 'unknown']);

export interface ProxyMetricsOptions {
  /** Distinct (provider, model) label sets kept; later models are counted as `model="other"`. Default 100. */
  maxSeries?: number;
}

export class ProxyMetrics {
  private readonly series = new Map<string, Series>();
  private readonly upstreamErrors = new Map<string, number>();
  private readonly missSeries = new Map<string, MissSeries>();
  private readonly refusals = new Map<string, number>();
  /** Requests that went out unfixed because a fleet's shared state could not be had, and their misses. */
  private readonly unfixed = { requests: 0, rewritten: 0, waste: 0 };
  private readonly maxSeries: number;

  constructor(options: ProxyMetricsOptions = {}) {
    this.maxSeries = options.maxSeries ?? 100;
  }

  private get(rawProvider: string, rawModel: string): Series {
    // Label values come from clients: the set of series is capped, and so is every value's length.
    const provider = PROVIDERS.has(rawProvider) ? rawProvider : 'unknown';
    let key = `${provider}\u0000${capLabel(rawModel)}`;
    if (!this.series.has(key) && this.series.size >= this.maxSeries) key = `${provider}\u0000${OTHER_MODEL}`;
    let s = this.series.get(key);
    if (!s) {
      s = { requests: new Map(), read: 0, written: 0, uncached: 0, notReported: 0 };
      this.series.set(key, s);
    }
    return s;
  }

  record(
    provider: string,
    model: string,
    status: number | undefined,
    usage: NormalizedUsage | undefined,
  ): void {
    const s = this.get(provider, model);
    const code =
      status === undefined
        ? 'none'
        : Number.isInteger(status) && status >= 100 && status < 600
          ? String(status)
          : 'other';
    s.requests.set(code, (s.requests.get(code) ?? 0) + 1);
    if (!usage) return;
    if (!usage.cacheReported) {
      s.notReported++;
      s.uncached += usage.inputTotal;
      return;
    }
    s.read += usage.cacheRead;
    s.written += usage.cacheWrite;
    s.uncached += usage.uncached;
  }

  /** A miss the live analysis named (after the response ended): its cause, tokens re-written and waste. */
  miss(provider: string, cause: string, rewritten: number, waste: number | null): void {
    const key = `${provider}\u0000${cause}`;
    const m = this.missSeries.get(key) ?? { misses: 0, rewritten: 0, waste: 0 };
    m.misses++;
    m.rewritten += rewritten;
    m.waste += waste ?? 0;
    this.missSeries.set(key, m);
  }

  /** A request that went out unfixed because the shared state could not be had: what its miss cost. */
  wentUnfixed(rewritten: number, waste: number | null): void {
    this.unfixed.requests++;
    this.unfixed.rewritten += rewritten;
    this.unfixed.waste += waste ?? 0;
  }

  upstreamError(provider: string): void {
    this.upstreamErrors.set(provider, (this.upstreamErrors.get(provider) ?? 0) + 1);
  }

  /** A request the proxy answered itself, without the upstream (a closed set of reasons). */
  refused(reason: string): void {
    this.refusals.set(reason, (this.refusals.get(reason) ?? 0) + 1);
  }

  /** The Prometheus exposition text. */
  render(): string {
    const esc = (v: string) => v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
    const lines: string[] = [
      '# HELP cacheward_requests_total Requests forwarded, by provider, model and upstream status.',
      '# TYPE cacheward_requests_total counter',
    ];
    const labels = (provider: string, model: string) => `provider="${esc(provider)}",model="${esc(model)}"`;
    const rows = [...this.series.entries()].map(([k, s]) => {
      const [provider = '', model = ''] = k.split('\u0000');
      return { provider, model, s };
    });
    for (const { provider, model, s } of rows) {
      for (const [status, n] of s.requests)
        lines.push(`cacheward_requests_total{${labels(provider, model)},status="${status}"} ${n}`);
    }
    lines.push(
      '# HELP cacheward_tokens_total Input tokens by kind: read from cache, written to cache, uncached.',
    );
    lines.push('# TYPE cacheward_tokens_total counter');
    for (const { provider, model, s } of rows) {
      lines.push(`cacheward_tokens_total{${labels(provider, model)},kind="read"} ${s.read}`);
      lines.push(`cacheward_tokens_total{${labels(provider, model)},kind="written"} ${s.written}`);
      lines.push(`cacheward_tokens_total{${labels(provider, model)},kind="uncached"} ${s.uncached}`);
    }
    lines.push(
      '# HELP cacheward_cache_hit_ratio Tokens read from cache over all input tokens (token-weighted).',
    );
    lines.push('# TYPE cacheward_cache_hit_ratio gauge');
    for (const { provider, model, s } of rows) {
      const total = s.read + s.written + s.uncached;
      lines.push(
        `cacheward_cache_hit_ratio{${labels(provider, model)}} ${total ? (s.read / total).toFixed(6) : 0}`,
      );
    }
    lines.push('# HELP cacheward_usage_not_reported_total Responses whose usage carried no cache fields.');
    lines.push('# TYPE cacheward_usage_not_reported_total counter');
    for (const { provider, model, s } of rows)
      lines.push(`cacheward_usage_not_reported_total{${labels(provider, model)}} ${s.notReported}`);
    const misses = [...this.missSeries.entries()].map(([k, m]) => {
      const [provider = '', cause = ''] = k.split('\u0000');
      return { l: `provider="${esc(provider)}",cause="${esc(cause)}"`, m };
    });
    lines.push('# HELP cacheward_misses_total Requests whose cached prefix was written again, by cause.');
    lines.push('# TYPE cacheward_misses_total counter');
    for (const { l, m } of misses) lines.push(`cacheward_misses_total{${l}} ${m.misses}`);
    lines.push('# HELP cacheward_rewritten_tokens_total Tokens cached before and written again, by cause.');
    lines.push('# TYPE cacheward_rewritten_tokens_total counter');
    for (const { l, m } of misses) lines.push(`cacheward_rewritten_tokens_total{${l}} ${m.rewritten}`);
    lines.push(
      '# HELP cacheward_waste_usd_total What the re-written tokens cost beyond reading them, by cause.',
    );
    lines.push('# TYPE cacheward_waste_usd_total counter');
    for (const { l, m } of misses) lines.push(`cacheward_waste_usd_total{${l}} ${m.waste.toFixed(6)}`);
    lines.push('# HELP cacheward_upstream_errors_total Upstream connection failures and resets.');
    lines.push('# TYPE cacheward_upstream_errors_total counter');
    for (const [provider, n] of this.upstreamErrors)
      lines.push(`cacheward_upstream_errors_total{provider="${esc(provider)}"} ${n}`);
    lines.push(
      '# HELP cacheward_refused_total Requests the proxy answered itself, never sent upstream, by reason.',
    );
    lines.push('# TYPE cacheward_refused_total counter');
    for (const [reason, n] of this.refusals)
      lines.push(`cacheward_refused_total{reason="${esc(reason)}"} ${n}`);
    const u = this.unfixed;
    lines.push(
      '# HELP cacheward_unfixed_requests_total Requests that went out unfixed because the shared state could not be had.',
      '# TYPE cacheward_unfixed_requests_total counter',
      `cacheward_unfixed_requests_total ${u.requests}`,
      '# HELP cacheward_unfixed_rewritten_tokens_total Tokens those requests re-wrote (their own misses).',
      '# TYPE cacheward_unfixed_rewritten_tokens_total counter',
      `cacheward_unfixed_rewritten_tokens_total ${u.rewritten}`,
      '# HELP cacheward_unfixed_waste_usd_total What those re-written tokens cost beyond reading them.',
      '# TYPE cacheward_unfixed_waste_usd_total counter',
      `cacheward_unfixed_waste_usd_total ${u.waste.toFixed(6)}`,
    );
    return `${lines.join('\n')}\n`;
  }
}
