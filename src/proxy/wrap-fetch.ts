// wrapFetch: the proxy's exchange for apps that hand their SDK a `fetch`. The same fix stage, commit and
// records, no server: requests go out through the wrapped fetch, as the app made them unless a fix changed them.

import { randomBytes } from 'node:crypto';
import { type CaptureState, CaptureWriter } from '../capture/capture-writer.js';
import { defaultCaptureDir } from '../capture/default-dir.js';
import type { Clock } from '../core/clock.js';
import { type Logger, lineLogger, loggerChannels } from '../core/logger.js';
import type { Fix, FixRegistry } from '../fixes/fix.js';
import { fixRegistry } from '../fixes/registry.js';
import { PrefixBuilder } from '../prefix/build-prefix.js';
import type { CaptureMode, CaptureRecord } from '../record/capture-record.js';
import { DEFAULT_MAX_CONVERSATIONS, MemoryProxyState } from '../state/memory-proxy-state.js';
import { formatFromRoute } from '../wire/request-body.js';
import { afterResponse } from './after-response.js';
import { Exchange, type ExchangeDeps } from './exchange.js';
import { ExchangeRecorder } from './exchange-recorder.js';
import { FixRefusals } from './fix-refusals.js';
import type { ForwardFacts } from './forward-upstream.js';
import { ProxyMetrics } from './proxy-metrics.js';
import { ProxyConfigError } from './proxy-options.js';
import { MAX_ERROR_BYTES, mayRefuse, refusalIn } from './refusal.js';
import { ResponseTap } from './response-tap.js';
import { WorkSlices } from './work-slices.js';

/** A `fetch`: what wrapFetch wraps and what it returns (with its capture's extras). */
export type FetchLike = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

/** Options for {@link wrapFetch}: the capture and fix settings of `createProxy`. */
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
  /**
   * Fixes by name or fix objects, as `createProxy`'s `fixes` (none by default: every request goes out as the
   * app made it). A fixed request the provider refuses is sent again as the app made it, once, and that fix
   * is off for the conversation on that model.
   */
  fixes?: ReadonlyArray<string | Fix>;
  /** Where fix names are looked up (default the built-in fixes, `fixRegistry()`). */
  registry?: FixRegistry;
  /** With fixes: a folder for their state, so a restarted app goes on where it stopped (default: memory only). */
  stateDir?: string;
}

/** A fetch that records captures, plus the controls to flush and close its capture. */
export type CapturingFetch = FetchLike & {
  /** Every exchange that has ended is recorded and its record written. */
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

/**
 * The headers the app's call sends: `init.headers` when given (they replace a Request's own, as the Fetch
 * standard's Request constructor does), else the Request's.
 */
function sentHeaders(input: string | URL | Request, init: RequestInit | undefined): Headers {
  if (init?.headers !== undefined) return new Headers(init.headers);
  return new Headers(input instanceof Request ? input.headers : undefined);
}

/**
 * The app's call with a fix's body and headers: the same input and every other init member (method, signal,
 * dispatcher…). The body is given as the app gave it (a string stays a string, so the fetch derives the same
 * content-type); the length is the fetch's to set.
 */
function fixedInit(
  init: RequestInit | undefined,
  headers: Headers,
  body: Buffer,
  override: Record<string, string> | undefined,
): RequestInit {
  const out = new Headers(headers);
  for (const [k, v] of Object.entries(override ?? {})) out.set(k, v);
  out.delete('content-length');
  return { ...init, headers: out, body: typeof init?.body === 'string' ? body.toString('utf8') : body };
}

/**
 * An answer's body read up to `limit` bytes: the chunks read, whether that was all of it, and the answer
 * again with the same body (what was read, then the rest) for when it is handed on.
 */
async function readHead(
  response: Response,
  limit: number,
): Promise<{ bytes: Buffer; whole: boolean; again: Response }> {
  const head: Uint8Array[] = [];
  let size = 0;
  const reader = (response.body as ReadableStream<Uint8Array>).getReader();
  let whole = false;
  while (size <= limit) {
    const next = await reader.read();
    if (next.done) {
      whole = true;
      break;
    }
    head.push(next.value);
    size += next.value.byteLength;
  }
  let i = 0;
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (i < head.length) controller.enqueue(head[i++] as Uint8Array);
      else if (whole) controller.close();
      else {
        const next = await reader.read();
        if (next.done) controller.close();
        else controller.enqueue(next.value);
      }
    },
    cancel: (reason) => reader.cancel(reason),
  });
  const again = new Response(body, {
    status: response.status,
    statusText: response.statusText,
    headers: response.headers,
  });
  return { bytes: Buffer.concat(head), whole, again };
}

/** The options wrapFetch knows: another key is a misspelling (`captrue`) that would be ignored silently. */
const OPTION_KEYS = new Set([
  'capture',
  'dir',
  'maxMb',
  'clock',
  'logger',
  'maxConversations',
  'onRecord',
  'fixes',
  'registry',
  'stateDir',
]);
const CAPTURE_MODES = new Set(['off', 'hashes', 'full']);

/** Throws ProxyConfigError naming what to change, for arguments a plain-JS caller could get wrong. */
function checkArguments(fetchImpl: unknown, options: WrapFetchOptions): void {
  if (typeof fetchImpl !== 'function')
    throw new ProxyConfigError(
      `wrapFetch needs the fetch to wrap as its first argument (e.g. globalThis.fetch), not ${typeof fetchImpl}`,
    );
  const unknown = Object.keys(options).filter((k) => !OPTION_KEYS.has(k));
  if (unknown.length)
    throw new ProxyConfigError(
      `wrapFetch: unknown option${unknown.length > 1 ? 's' : ''} ${unknown.join(', ')}; it takes ${[...OPTION_KEYS].join(', ')}`,
    );
  if (options.capture != null && !CAPTURE_MODES.has(options.capture))
    throw new ProxyConfigError(
      `wrapFetch: capture must be 'off', 'hashes' or 'full', not ${JSON.stringify(options.capture)}`,
    );
}

export function wrapFetch(fetchImpl: FetchLike, options: WrapFetchOptions = {}): CapturingFetch {
  checkArguments(fetchImpl, options);
  // Before anything is opened: a wrong fix name leaves no capture file behind.
  const fixes = (options.registry ?? fixRegistry()).resolve(options.fixes ?? []);
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
    // An app may wrap its fetch and never use it: no empty capture file is left behind.
    openFirst: 'with-first-record',
    ...(options.maxMb !== undefined ? { maxBytes: options.maxMb * 1024 * 1024 } : {}),
  });
  const metrics = new ProxyMetrics();
  // The proxy's memory state: conversations (to tell continues from forks) and, with fixes, their state.
  const state = new MemoryProxyState({
    maxConversations: options.maxConversations ?? DEFAULT_MAX_CONVERSATIONS,
    ...(fixes.length && options.stateDir ? { stateDir: options.stateDir } : {}),
    log,
  });
  const builder = new PrefixBuilder();
  const recorder = new ExchangeRecorder({ writer, metrics, builder, conversations: state.local });
  const deps: ExchangeDeps = { log, fixes, builder, state, recorder, refusals: new FixRefusals() };
  const slices = new WorkSlices();

  /** Records being made: `flush` waits for them. */
  const recording = new Set<Promise<unknown>>();
  /**
   * Records one exchange once its facts are known (counted by `flush` from this call on); a failure here is
   * logged and never reaches the app's request.
   */
  const record = (
    exchange: Exchange,
    sent: Buffer | undefined,
    facts: ForwardFacts | Promise<ForwardFacts>,
  ): Promise<void> => {
    const done = (async () => {
      const made = exchange.facts(sent ?? Buffer.alloc(0), clock.now(), await facts);
      const r = await afterResponse({ recorder, state, log, slices }, made, exchange.pendingCommit);
      if (r) options.onRecord?.(r);
    })()
      .catch((err) => log(`cacheward: exchange ${exchange.request.id} not recorded: ${errorText(err)}`))
      .finally(() => recording.delete(done));
    recording.add(done);
    return done;
  };

  const wrapped = (async (input: string | URL | Request, init?: RequestInit) => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    const method = (init?.method ?? (input instanceof Request ? input.method : 'GET')).toUpperCase();
    const format = method === 'POST' ? formatFromRoute(url.pathname) : undefined;
    if (!format) return fetchImpl(input, init);
    const start = clock.now();
    const requestHeaders = sentHeaders(input, init);
    const sent = await bodyBytes(input, init);
    const provider = format === 'anthropic-messages' ? 'anthropic' : 'openai';
    const exchange = new Exchange(deps, {
      id: `cw_${start.toString(36)}${randomBytes(5).toString('hex')}`,
      provider,
      format,
      route: url.pathname,
      method,
      start,
      requestHeaders: () => requestHeaders,
    });
    if (exchange.fixing && sent) await exchange.fix(sent);
    let response: Response;
    try {
      const unfixed = exchange.unfixed;
      if (!unfixed) response = await fetchImpl(input, init);
      else {
        const body = exchange.body as Buffer;
        response = await fetchImpl(input, fixedInit(init, requestHeaders, body, exchange.headerOverride));
        if (mayRefuse(provider, response.status, body.length > unfixed.body.length) && response.body) {
          // A fetch hands on the body decoded: the error is read as JSON, whatever its content-encoding was.
          const head = await readHead(response, MAX_ERROR_BYTES);
          const refusal = head.whole
            ? refusalIn(provider, response.status, head.bytes, undefined)
            : undefined;
          if (refusal !== undefined) {
            unfixed.refused(response.status, refusal);
            response = await fetchImpl(input, init);
          } else response = head.again;
        }
      }
    } catch (err) {
      const outcome = isAbort(err) ? 'client_aborted' : 'upstream_error';
      await record(exchange, sent, { outcome, error: String(err) });
      throw err;
    }
    const firstByte = clock.now();
    exchange.statusKnown(response.status);
    // A fetch hands on the body decoded (the Fetch standard), whatever its content-encoding header says.
    const tap = new ResponseTap(format, response.headers.get('content-type'), null);
    if (!response.body) {
      await record(
        exchange,
        sent,
        tap
          .finish()
          .then((facts) => ({ firstByte, status: response.status, outcome: 'complete', response: facts })),
      );
      return response;
    }
    const status = response.status;
    const finished = (outcome: ForwardFacts['outcome'], error?: string) =>
      record(
        exchange,
        sent,
        tap
          .finish()
          .catch(() => undefined)
          .then((facts) => ({
            firstByte,
            status,
            outcome,
            ...(error !== undefined ? { error } : {}),
            ...(facts ? { response: facts } : {}),
          })),
      );
    const observed = observedBody(response.body, tap, {
      // The record is made before the app sees the end, as the proxy's is before the client's last byte.
      complete: () => finished(status >= 400 ? 'error' : 'complete'),
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
  // Every exchange that ended is recorded, then written.
  wrapped.flush = async () => {
    await Promise.all(recording);
    await writer.flush();
  };
  wrapped.close = async () => {
    await Promise.all(recording);
    await state.close();
    await writer.close();
  };
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
  const onAbort = () => once() && ends.cancelled();
  /** True the first time only: each end is told once, and the app's signal is let go (it may outlive us). */
  const once = () => {
    if (told) return false;
    told = true;
    ends.signal?.removeEventListener('abort', onAbort);
    return true;
  };
  ends.signal?.addEventListener('abort', onAbort, { once: true });
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
