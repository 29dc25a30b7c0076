// `cacheward watch` as a library: transcripts followed, their calls through the proxy's live analysis, and the
// proxy's page, events, state and metrics served on loopback. No proxy in the path: it never sends a request,
// and nothing from a transcript is written anywhere.

import { PriceTable } from '../analyze/price-table.js';
import { type Logger, loggerChannels } from '../core/logger.js';
import { runStepped } from '../core/stepped-work.js';
import { VERSION } from '../core/version.js';
import { LiveAnalysis, type LiveRequest } from '../proxy/live-analysis.js';
import { LiveEvents } from '../proxy/live-events.js';
import { ProxyMetrics } from '../proxy/proxy-metrics.js';
import { TranscriptWatch, type TranscriptWatchStatus } from './transcript-watch.js';
import { listenWatchServer } from './watch-server.js';

export interface WatchOptions {
  /** Transcript folders or files (they may not exist yet). */
  paths: readonly string[];
  /** Calls that started this long before the watch started are shown too (ms; default an hour). */
  sinceMs?: number;
  /** How long a file must stop growing before a half-written last line is read as it is (default 30 s). */
  settleMs?: number;
  /** 0 (default) = any free port; always on 127.0.0.1. */
  port?: number;
  allowedHosts?: readonly string[];
  prices?: PriceTable;
  /** `info`: what the watch is doing; `warn`: a transcript's warnings; `request`: every call shown. */
  logger?: Logger<LiveRequest>;
  /** How often followed files are looked at and folders walked again (ms; tests shorten them). */
  pollMs?: number;
  rescanMs?: number;
  /** Files followed at once (default 200; tests lower it). */
  maxFiles?: number;
  now?: () => number;
}

export interface WatchHealth {
  status: 'ok';
  version: string;
  /** Calls that started at or after this time are shown. */
  since: string;
  transcripts: TranscriptWatchStatus;
}

export interface CachewardWatch {
  url: string;
  /** Reads what is in the folders (changed since the cutoff) and follows them; resolves once that read is done. */
  start(): Promise<void>;
  health(): WatchHealth;
  close(): Promise<void>;
}

export const DEFAULT_SINCE_MS = 3_600_000;
export const DEFAULT_SETTLE_MS = 30_000;

/** Listens first (so the URL can be said at once); `start()` then reads and follows. */
export async function startWatch(o: WatchOptions): Promise<CachewardWatch> {
  const now = o.now ?? Date.now;
  const log = loggerChannels(o.logger, {});
  const live = new LiveAnalysis({ prices: o.prices ?? new PriceTable() });
  const metrics = new ProxyMetrics();
  const events = new LiveEvents(live);
  // As the proxy counts a finished request's miss and logs its line.
  const unsubscribe = live.subscribe((row) => {
    if (row.cause && row.cause !== 'cold_start')
      metrics.miss(row.provider, row.cause, row.rewrittenTokens ?? 0, row.waste ?? null);
    log.request(row);
  });
  const cutoff = now() - (o.sinceMs ?? DEFAULT_SINCE_MS);
  const transcripts = new TranscriptWatch({
    paths: o.paths,
    cutoff,
    settleMs: o.settleMs ?? DEFAULT_SETTLE_MS,
    ...(o.pollMs !== undefined ? { pollMs: o.pollMs } : {}),
    ...(o.rescanMs !== undefined ? { rescanMs: o.rescanMs } : {}),
    ...(o.maxFiles !== undefined ? { maxFiles: o.maxFiles } : {}),
    now,
    onRecord: async (record, shown) => {
      if (!shown) {
        live.observe(record);
        return;
      }
      metrics.record(record.provider, record.model ?? 'unknown', record.status, record.usage?.normalized);
      await runStepped(live.addSteps(record));
    },
    remembers: (id) => live.remembers(id),
    warn: (line) => log.warn(line),
    say: (line) => log.info(line),
  });
  const health = (): WatchHealth => ({
    status: 'ok',
    version: VERSION,
    since: new Date(cutoff).toISOString(),
    transcripts: transcripts.status(),
  });
  let server: Awaited<ReturnType<typeof listenWatchServer>>;
  try {
    server = await listenWatchServer({
      port: o.port ?? 0,
      ...(o.allowedHosts ? { allowedHosts: o.allowedHosts } : {}),
      live,
      events,
      metrics,
      health,
    });
  } catch (err) {
    unsubscribe();
    throw err;
  }
  return {
    url: server.url,
    start: () => transcripts.start(),
    health,
    async close() {
      await transcripts.close();
      await server.close();
      unsubscribe();
    },
  };
}
