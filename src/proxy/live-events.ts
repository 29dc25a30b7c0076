// The live page's server-sent events: one stream per subscriber, each row serialized once for all of them.
// It must never hold more than a small buffer per subscriber nor serve more than a fixed number of them.

import type { ServerResponse } from 'node:http';
import type { LiveAnalysis } from './live-analysis.js';

export interface LiveEventsOptions {
  /** Subscribers served at once; one more is answered 503. Default 32. */
  maxSubscribers?: number;
  /**
   * Bytes a subscriber may leave unread in the proxy (beyond what the kernel holds) before it is dropped.
   * Default 1 MB: the first snapshot (500 rows of capped labels) fits; a reader that keeps up never nears it.
   */
  maxBuffered?: number;
  /** How often an idle stream gets a comment line (ms). Default 15,000. */
  keepAliveMs?: number;
}

interface Subscriber {
  res: ServerResponse;
  timer: NodeJS.Timeout;
}

/**
 * Fans the live analysis out to `GET /_cacheward/events`. A subscriber that stops reading is dropped once
 * `maxBuffered` bytes wait for it; its browser's EventSource reconnects and starts again from the latest
 * snapshot, so a slow page misses rows, never the totals.
 */
export class LiveEvents {
  private readonly subscribers = new Set<Subscriber>();
  private readonly max: { subscribers: number; buffered: number; keepAliveMs: number };
  private readonly stats = { dropped: 0, refused: 0 };
  private unsubscribe: (() => void) | undefined;

  constructor(
    private readonly live: LiveAnalysis,
    options: LiveEventsOptions = {},
  ) {
    this.max = {
      subscribers: options.maxSubscribers ?? 32,
      buffered: options.maxBuffered ?? 1024 * 1024,
      keepAliveMs: options.keepAliveMs ?? 15_000,
    };
  }

  /** Serves one `GET /_cacheward/events`: the snapshot, then every row as it is analyzed. */
  serve(res: ServerResponse): void {
    if (this.subscribers.size >= this.max.subscribers) {
      this.stats.refused++;
      res.writeHead(503, { 'content-type': 'text/plain; charset=utf-8', 'retry-after': '10' });
      res.end(
        `cacheward proxy: ${this.subscribers.size} live-page streams are open already (the most it serves); close a tab of the live page and reload\n`,
      );
      return;
    }
    res.writeHead(200, {
      'content-type': 'text/event-stream',
      'cache-control': 'no-store',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    // A comment line now and then keeps idle connections (and the proxies between) open.
    const timer = setInterval(() => this.send(sub, ': keep-alive\n\n'), this.max.keepAliveMs);
    timer.unref();
    const sub: Subscriber = { res, timer };
    this.subscribers.add(sub);
    res.on('close', () => this.remove(sub));
    if (!this.unsubscribe) {
      this.unsubscribe = this.live.subscribe((row) => {
        const text = `event: request\ndata: ${JSON.stringify(row)}\n\n`;
        for (const s of this.subscribers) this.send(s, text);
      });
    }
    this.send(sub, `event: snapshot\ndata: ${JSON.stringify(this.live.snapshot())}\n\n`);
  }

  /** Ends every stream (the proxy is closing). */
  close(): void {
    for (const s of [...this.subscribers]) {
      this.remove(s);
      s.res.destroy();
    }
  }

  /** Prometheus lines: streams open, bytes waiting for them, and those dropped or refused. */
  metricsText(): string {
    let buffered = 0;
    for (const s of this.subscribers) buffered += s.res.writableLength;
    return [
      '# HELP cacheward_live_subscribers Live-page event streams open.',
      '# TYPE cacheward_live_subscribers gauge',
      `cacheward_live_subscribers ${this.subscribers.size}`,
      '# HELP cacheward_live_buffered_bytes Bytes of live-page events waiting for their readers in the proxy.',
      '# TYPE cacheward_live_buffered_bytes gauge',
      `cacheward_live_buffered_bytes ${buffered}`,
      '# HELP cacheward_live_subscribers_dropped_total Live-page streams dropped because their reader fell behind.',
      '# TYPE cacheward_live_subscribers_dropped_total counter',
      `cacheward_live_subscribers_dropped_total ${this.stats.dropped}`,
      '# HELP cacheward_live_subscribers_refused_total Live-page streams refused (too many open).',
      '# TYPE cacheward_live_subscribers_refused_total counter',
      `cacheward_live_subscribers_refused_total ${this.stats.refused}`,
      '',
    ].join('\n');
  }

  /** Writes `text` to one subscriber, or drops it when what it has not read would pass the bound. */
  private send(sub: Subscriber, text: string): void {
    if (sub.res.destroyed) return;
    // The snapshot is the first write: it always goes (it is bounded by the rows the analysis keeps).
    if (sub.res.writableLength > 0 && sub.res.writableLength + text.length > this.max.buffered) {
      this.stats.dropped++;
      this.remove(sub);
      sub.res.destroy();
      return;
    }
    sub.res.write(text);
  }

  private remove(sub: Subscriber): void {
    if (!this.subscribers.delete(sub)) return;
    clearInterval(sub.timer);
    if (!this.subscribers.size) {
      this.unsubscribe?.();
      this.unsubscribe = undefined;
    }
  }
}
