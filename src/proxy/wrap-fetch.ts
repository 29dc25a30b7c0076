// wrapFetch: the proxy's capture for apps that hand their SDK a `fetch`. The same records, no server:
// requests go out through the wrapped fetch unchanged; responses are observed as the app reads them.

import { randomBytes } from 'node:crypto';
import { type CaptureState, CaptureWriter } from '../capture/capture-writer.js';
import { defaultCaptureDir } from '../capture/default-dir.js';
import { liveStoreBounds, MemoryConversationStore } from '../conversation/conversation-store.js';
import { ConversationTracker } from '../conversation/conversation-tracker.js';
import type { Clock } from '../core/clock.js';
import { type Logger, lineLogger, loggerChannels } from '../core/logger.js';
import { PrefixBuilder } from '../prefix/build-prefix.js';
import type { CaptureMode, CaptureRecord } from '../record/capture-record.js';
import { DEFAULT_MAX_CONVERSATIONS } from '../state/memory-proxy-state.js';
import { formatFromRoute } from '../wire/request-body.js';
import { type ExchangeFacts, ExchangeRecorder } from './exchange-recorder.js';
import { ProxyMetrics } from './proxy-metrics.js';
import { ResponseTap } from './response-tap.js';

/** A `fetch`: what wrapFetch wraps and what it returns (with its capture's extras). */
export type FetchLike = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

/** Options for {@link wrapFetch}: the capture settings of `createProxy`. */
export interface WrapFetchOptions {
  capture?: CaptureMode;
  dir?: string;
  maxMb?: number;
  clock?: Clock;
  /** Where capture problems are reported (`logger.warn`). Default stderr. */
  logger?: Logger;
  /** Conversations remembered to tell continues from forks, as the proxy's `maxConversations`. Default 10,000. */
  maxConversations?: number;
  /** Called with every finished exchange's record (whatever the capture mode), after the response ends. */
  onRecord?: (record: CaptureRecord) => void;
}

/** A fetch that records captures, plus the controls to flush and close its capture. */
export type CapturingFetch = FetchLike & {
  flush(): Promise<void>;
  close(): Promise<void>;
  captureState(): CaptureState;
  metrics(): string;
};

async function bodyBytes(input: string | URL | Request, init?: RequestInit): Promise<Buffer | undefined> {
  const body = init?.body ?? (input instanceof Request ? await input.clone().arrayBuffer() : undefined);
  if (body === undefined || body === null) return Buffer.alloc(0);
  if (typeof body === 'string') return Buffer.from(body);
  if (body instanceof ArrayBuffer) return Buffer.from(body);
  if (ArrayBuffer.isView(body)) return Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  return undefined; // a stream or form: it goes out untouched, unobserved
}

export function wrapFetch(fetchImpl: FetchLike, options: WrapFetchOptions = {}): CapturingFetch {
  const clock = options.clock ?? { now: () => Date.now() };
  const logger = loggerChannels(
    options.logger,
    lineLogger('cacheward', (line) => process.stderr.write(`${line}\n`)),
  );
  const log = (line: string) => logger.warn(line);
  const writer = new CaptureWriter({
    dir: options.dir ?? defaultCaptureDir(),
    mode: options.capture ?? 'hashes',
    clock,
    log,
    ...(options.maxMb !== undefined ? { maxBytes: options.maxMb * 1024 * 1024 } : {}),
  });
  const metrics = new ProxyMetrics();
  const exchanges = new ExchangeRecorder({
    writer,
    metrics,
    builder: new PrefixBuilder(),
    conversations: new ConversationTracker(
      new MemoryConversationStore(liveStoreBounds(options.maxConversations ?? DEFAULT_MAX_CONVERSATIONS)),
    ),
  });
  const recorder = {
    /** Records one exchange; a failure here is logged and never reaches the app's request. */
    record(facts: ExchangeFacts): void {
      try {
        const record = exchanges.record(facts);
        options.onRecord?.(record);
      } catch (err) {
        log(`cacheward: exchange ${facts.id} not recorded: ${(err as Error)?.message ?? String(err)}`);
      }
    },
  };

  const wrapped = (async (input: string | URL | Request, init?: RequestInit) => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    const method = (init?.method ?? (input instanceof Request ? input.method : 'GET')).toUpperCase();
    const format = method === 'POST' ? formatFromRoute(url.pathname) : undefined;
    if (!format) return fetchImpl(input, init);
    const start = clock.now();
    const requestHeaders = new Headers(input instanceof Request ? input.headers : undefined);
    new Headers(init?.headers).forEach((v, k) => {
      requestHeaders.set(k, v);
    });
    const sent = await bodyBytes(input, init);
    const id = `cw_${start.toString(36)}${randomBytes(5).toString('hex')}`;
    const provider = format === 'anthropic-messages' ? 'anthropic' : 'openai';
    const base: Pick<
      ExchangeFacts,
      'id' | 'provider' | 'route' | 'method' | 'requestHeaders' | 'forwarded' | 'fixes' | 'start'
    > = {
      id,
      provider,
      route: url.pathname,
      method,
      requestHeaders,
      forwarded: sent ?? Buffer.alloc(0),
      fixes: [],
      start,
    };
    let response: Response;
    try {
      response = await fetchImpl(input, init);
    } catch (err) {
      const outcome = isAbort(err) ? 'client_aborted' : 'upstream_error';
      recorder.record({ ...base, end: clock.now(), outcome, error: String(err) });
      throw err;
    }
    const firstByte = clock.now();
    // A fetch hands on the body decoded (the Fetch standard), whatever its content-encoding header says.
    const tap = new ResponseTap(format, response.headers.get('content-type'), null);
    if (!response.body) {
      recorder.record({
        ...base,
        end: clock.now(),
        firstByte,
        status: response.status,
        outcome: 'complete',
        response: await tap.finish(),
      });
      return response;
    }
    const finished = async (outcome: ExchangeFacts['outcome'], error?: string) => {
      const facts = await tap.finish().catch(() => undefined);
      recorder.record({
        ...base,
        end: clock.now(),
        firstByte,
        status: response.status,
        outcome,
        ...(error !== undefined ? { error } : {}),
        ...(facts ? { response: facts } : {}),
      });
    };
    const observed = observedBody(response.body, tap, {
      // The record is made before the app sees the end, as the proxy's is before the client's last byte.
      complete: () => finished(response.status >= 400 ? 'error' : 'complete'),
      broken: (err) =>
        isAbort(err)
          ? finished('client_aborted')
          : finished('upstream_reset', `upstream connection dropped mid-response: ${errorText(err)}`),
      cancelled: () => void finished('client_aborted'),
      signal: init?.signal ?? (input instanceof Request ? input.signal : undefined),
    });
    return new Response(observed, {
      status: response.status,
      statusText: response.statusText,
      headers: response.headers,
    });
  }) as CapturingFetch;
  wrapped.flush = () => writer.flush();
  wrapped.close = () => writer.close();
  wrapped.captureState = () => writer.state();
  wrapped.metrics = () => metrics.render();
  return wrapped;
}

const errorText = (err: unknown) => (err instanceof Error ? err.message : String(err));

/** The app's own abort (its AbortSignal), not the upstream's failure. */
const isAbort = (err: unknown) => err instanceof Error && err.name === 'AbortError';

/** What happened to a response body the app was reading. */
interface BodyEnds {
  complete(): Promise<void>;
  broken(err: unknown): Promise<void>;
  cancelled(): void;
  /** The app's abort signal: an abort while the app is not reading is a cancel too. */
  signal?: AbortSignal | null | undefined;
}

/**
 * The response body as the app reads it, every chunk passed to the tap on its way: its end, a break
 * mid-stream and the app's cancel are each told once (a TransformStream's flush sees only the first).
 */
function observedBody(
  body: ReadableStream<Uint8Array>,
  tap: ResponseTap,
  ends: BodyEnds,
): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  let told = false;
  /** True the first time only: each end is told once. */
  const once = () => {
    if (told) return false;
    told = true;
    return true;
  };
  ends.signal?.addEventListener('abort', () => once() && ends.cancelled(), { once: true });
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        let next: Awaited<ReturnType<typeof reader.read>>;
        try {
          next = await reader.read();
        } catch (err) {
          if (once()) await ends.broken(err);
          controller.error(err);
          return;
        }
        if (next.done) {
          if (once()) await ends.complete();
          controller.close();
          return;
        }
        const chunk = next.value;
        tap.push(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength));
        controller.enqueue(chunk);
      },
      cancel(reason) {
        if (once()) ends.cancelled();
        return reader.cancel(reason);
      },
    },
    { highWaterMark: 0 },
  );
}
