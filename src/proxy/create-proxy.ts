// createProxy: forwards Anthropic and OpenAI traffic byte-exactly, streams responses back with backpressure,
// and records each exchange beside the stream. It never retries, never stores credentials, never blocks on capture.

import { PriceTable } from '../analyze/price-table.js';
import { AlreadyListeningError, type ListenOptions, NotListeningError } from '../core/listen.js';
import { LiveAnalysis } from './live-analysis.js';
import { type OpenProxy, openProxy } from './open-proxy.js';
import { resolveProxyConfig } from './proxy-config.js';
import { ProxyMetrics } from './proxy-metrics.js';
import type { CachewardProxy, ProxyOptions } from './proxy-options.js';

export {
  type CachewardProxy,
  DEFAULT_ANTHROPIC_UPSTREAM,
  DEFAULT_OPENAI_UPSTREAM,
  ProxyConfigError,
  type ProxyHealth,
  type ProxyOptions,
} from './proxy-options.js';

/**
 * A proxy, checked but not yet listening: `await proxy.listen()` starts it. Throws ProxyConfigError at once
 * for an upstream that is not a URL, UnknownFixError for an unknown fix name.
 */
export function createProxy(options: ProxyOptions = {}): CachewardProxy {
  const config = resolveProxyConfig(options);
  const metrics = new ProxyMetrics();
  const live = new LiveAnalysis({ prices: options.prices ?? new PriceTable() });
  let phase: 'new' | 'starting' | 'listening' | 'closed' = 'new';
  let open: OpenProxy | undefined;
  // After close(), health() still reports the final counts (what the CLI prints on the way out).
  let last: OpenProxy | undefined;
  const running = (): OpenProxy => {
    if (!open) throw new NotListeningError('proxy');
    return open;
  };
  return {
    async listen(at: ListenOptions = {}) {
      if (phase !== 'new')
        throw new AlreadyListeningError(
          'proxy',
          phase === 'closed' ? 'was closed: create another proxy' : 'is already listening',
        );
      phase = 'starting';
      try {
        open = await openProxy(options, config, at, metrics, live);
      } catch (err) {
        phase = 'new';
        throw err;
      }
      phase = 'listening';
      last = open;
      return open.url;
    },
    get url() {
      return running().url;
    },
    health: () => (open ?? last ?? running()).health(),
    metrics: () => metrics.render(),
    live,
    flush: async () => {
      await open?.flush();
    },
    async close() {
      const o = open;
      open = undefined;
      phase = 'closed';
      await o?.close();
    },
  };
}
