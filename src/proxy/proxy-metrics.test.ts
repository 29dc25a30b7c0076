import { describe, expect, it } from 'vitest';
import { ProxyMetrics } from './proxy-metrics.js';

const usage = { inputTotal: 10, cacheRead: 6, cacheWrite: 3, uncached: 1, output: 1, cacheReported: true };

describe('ProxyMetrics', () => {
  it('caps label sets: 5,000 model names fold into model="other", and no count is lost', () => {
    const m = new ProxyMetrics();
    for (let i = 0; i < 5_000; i++) m.record('anthropic', `claude-fake-${i}`, 200, usage as never);
    const text = m.render();
    const series = text.split('\n').filter((l) => l.startsWith('cacheward_requests_total{'));
    expect(series.length).toBeLessThanOrEqual(101);
    expect(Buffer.byteLength(text)).toBeLessThan(64 * 1024);
    expect(text).toContain('cacheward_requests_total{provider="anthropic",model="other",status="200"} 4900');
    const total = series.reduce((n, l) => n + Number(l.split(' ').at(-1)), 0);
    expect(total).toBe(5_000);
    expect(text).toContain('cacheward_tokens_total{provider="anthropic",model="other",kind="read"} 29400');
  });

  it('keeps odd statuses and providers to a few label values', () => {
    const m = new ProxyMetrics();
    m.record('weird-provider', 'm', 999, undefined);
    m.record('openai', 'm', 200, undefined);
    expect(m.render()).toContain('cacheward_requests_total{provider="unknown",model="m",status="other"} 1');
  });
});
