// Relays Responses API WebSockets (`/v1/responses`) to the upstream's: every frame reaches the other side
// as it came, and each `response.create` is one exchange, recorded and analyzed as an HTTP one is
// (after-response.ts). It never alters, drops or answers a frame for the upstream, and never waits on capture.

import { randomBytes } from 'node:crypto';
import { type IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocket, WebSocketServer } from 'ws';
import type { Clock } from '../core/clock.js';
import { errorBody } from '../wire/provider-errors.js';
import { createStreamReader, type StreamReader } from '../wire/sse-stream.js';
import type { Admission } from './admission.js';
import { type AfterResponseDeps, afterResponse } from './after-response.js';
import type { ExchangeFacts } from './exchange-recorder.js';
import { forwardHeaders, type UpstreamProvider, upstreamOf, webHeaders } from './forward-headers.js';
import type { MemoryHooks } from './memory-release.js';
import type { ProxyMetrics } from './proxy-metrics.js';

/** The route whose `response.create` messages are exchanges; other upgrades are relayed unrecorded. */
const RESPONSES = '/v1/responses';

/** Frames larger than this close the socket with 1009 (ws holds a message whole). */
export const DEFAULT_MAX_FRAME_BYTES = 64 * 1024 * 1024;

/** A side stops being read while the other holds this much unsent, and resumes below a quarter of it. */
const HIGH_WATER = 4 * 1024 * 1024;

/** The events that end a response on the socket. */
const TERMINAL = new Set(['response.completed', 'response.incomplete', 'response.failed', 'error']);

/** Upgrade-response headers the relay does not copy from the upstream's 101 (ws writes its own). */
const OWN_HEADERS = new Set([
  'connection',
  'upgrade',
  'sec-websocket-accept',
  'sec-websocket-extensions',
  'sec-websocket-protocol',
  'content-length',
  'transfer-encoding',
  'keep-alive',
]);

export interface WebSocketRelayDeps extends AfterResponseDeps {
  clock: Clock;
  metrics: ProxyMetrics;
  memory: MemoryHooks;
  /** Exchanges whose record is still being made (flush() waits for them). */
  recording: Set<Promise<unknown>>;
  /** Largest frame relayed, in bytes (default 64 MB). */
  maxFrameBytes?: number;
}

/** One `response.create` whose response has not ended yet. */
interface Pending {
  id: string;
  start: number;
  forwarded: Buffer;
  reader: StreamReader;
  /** The type of the event last read (set by the reader's callback). */
  last?: { type: string; status?: number };
  bytes: number;
  firstByte?: number;
}

/** The first event type of a JSON text, read without parsing the rest (the client's frames are large). */
const LEADING_TYPE = /^\s*\{\s*"type"\s*:\s*"([^"\\]{1,64})"/;

export class WebSocketRelay {
  private readonly server: WebSocketServer;
  private readonly sockets = new Set<WebSocket>();
  /** Headers of each upstream's 101, copied into the client's. */
  private readonly upgradeHeaders = new WeakMap<IncomingMessage, string[]>();
  private pendingCount = 0;
  private live = 0;
  private readonly frames = { client: 0, upstream: 0 };
  private opened = 0;
  private responses = 0;

  constructor(private readonly deps: WebSocketRelayDeps) {
    this.server = new WebSocketServer({
      noServer: true,
      perMessageDeflate: false,
      maxPayload: deps.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES,
      // The subprotocol is the upstream's choice (handleUpgrade runs once the upstream accepted).
      handleProtocols: (_protocols, req) => this.upgradeHeaders.get(req)?.[0] || false,
    });
    this.server.on('headers', (headers, req) => {
      const extra = this.upgradeHeaders.get(req);
      if (extra) headers.push(...extra.slice(1));
    });
  }

  /** Exchanges in flight on some socket. */
  get busy(): boolean {
    return this.pendingCount > 0;
  }

  /**
   * Handles one upgrade request: the same admission as HTTP (answered on the socket when refused), then
   * the upstream's WebSocket (the route's upstream, as for HTTP), and only once it accepted, the client's. A
   * refused upstream handshake is answered with the upstream's own status and body.
   */
  upgrade(
    req: IncomingMessage,
    socket: Duplex,
    head: Buffer,
    upstreams: Readonly<Record<UpstreamProvider, URL>>,
    admission: Admission,
  ): void {
    const rawUrl = req.url ?? '/';
    const path = rawUrl.split('?')[0] ?? '/';
    const id = this.newId();
    const provider = upstreamOf(path, req.headers);
    const base = upstreams[provider];
    socket.on('error', () => {});
    const res = new ServerResponse(req);
    res.shouldKeepAlive = false;
    res.assignSocket(socket as never);
    res.once('finish', () => socket.end());
    if (!admission.admit(req, res, provider, id)) return;
    res.detachSocket(socket as never);

    const protocol = base.protocol === 'https:' ? 'wss:' : 'ws:';
    const target = `${protocol}//${base.host}${base.pathname.replace(/\/+$/, '')}${rawUrl}`;
    const headers = forwardHeaders(req.headers);
    for (const name of Object.keys(headers)) if (name.startsWith('sec-websocket-')) delete headers[name];
    const protocols = String(req.headers['sec-websocket-protocol'] ?? '')
      .split(',')
      .map((p) => p.trim())
      .filter(Boolean);
    const upstream = new WebSocket(target, protocols, {
      headers: headers as Record<string, string>,
      maxPayload: this.deps.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES,
      handshakeTimeout: 60_000,
      followRedirects: false,
    });
    let settled = false;
    const answer = (status: number, text: string, head: Record<string, string>, body: Buffer | string) => {
      settled = true;
      const lines = Object.entries({ ...head, 'content-length': String(Buffer.byteLength(body)) })
        .map(([k, v]) => `${k}: ${v}`)
        .join('\r\n');
      socket.end(`HTTP/1.1 ${status} ${text}\r\n${lines}\r\nconnection: close\r\n\r\n${body}`);
    };
    // The client left before the upstream answered: nothing was relayed yet.
    socket.once('close', () => {
      if (!settled) upstream.terminate();
    });
    upstream.once('upgrade', (response) => {
      const copied: string[] = [String(response.headers['sec-websocket-protocol'] ?? '')];
      for (const [name, value] of Object.entries(response.headers)) {
        if (value === undefined || OWN_HEADERS.has(name)) continue;
        for (const v of Array.isArray(value) ? value : [value]) copied.push(`${name}: ${v}`);
      }
      this.upgradeHeaders.set(req, copied);
    });
    upstream.once('unexpected-response', (_request, response) => {
      settled = true;
      const chunks: Buffer[] = [];
      let size = 0;
      response.on('data', (c: Buffer) => {
        if (size < 1024 * 1024) chunks.push(c);
        size += c.length;
      });
      response.once('end', () => {
        const keep: Record<string, string> = {};
        for (const [name, value] of Object.entries(response.headers))
          if (typeof value === 'string' && !OWN_HEADERS.has(name) && name !== 'connection')
            keep[name] = value;
        answer(
          response.statusCode ?? 502,
          response.statusMessage ?? '',
          keep,
          Buffer.concat(chunks).subarray(0, 1024 * 1024),
        );
        upstream.terminate();
      });
      response.once('error', () => socket.destroy());
    });
    upstream.on('error', (err) => {
      if (settled || upstream.readyState === WebSocket.OPEN) return;
      this.deps.metrics.upstreamError(provider);
      const message = `cacheward proxy: could not open the upstream WebSocket ${base.origin}: ${err.message}. Nothing was sent upstream; check --upstream.`;
      answer(
        502,
        'Bad Gateway',
        { 'content-type': 'application/json' },
        JSON.stringify(errorBody(provider, 500, message, id)),
      );
    });
    upstream.once('open', () => {
      if (socket.destroyed) {
        settled = true;
        upstream.terminate();
        return;
      }
      settled = true;
      this.server.handleUpgrade(req, socket, head, (client) => {
        this.upgradeHeaders.delete(req);
        this.relay(req, client, upstream, path === RESPONSES);
      });
    });
  }

  /** Sockets relayed (in all, and open now) and `response.create`s seen on them. */
  counts(): { sockets: number; open: number; responses: number } {
    return { sockets: this.opened, open: this.live, responses: this.responses };
  }

  /**
   * Ends every relayed socket at once (the proxy is closing); resolves once each has closed, so the
   * exchanges they cut short are handed to the recording path before the capture closes.
   */
  async close(): Promise<void> {
    await Promise.all(
      [...this.sockets].map(
        (ws) =>
          new Promise<void>((resolve) => {
            if (ws.readyState === WebSocket.CLOSED) return resolve();
            ws.once('close', () => resolve());
            ws.terminate();
          }),
      ),
    );
  }

  /** Prometheus lines: sockets open now, sockets and frames relayed. */
  metricsText(): string {
    return [
      '# HELP cacheward_websockets_open Responses WebSockets relayed now.',
      '# TYPE cacheward_websockets_open gauge',
      `cacheward_websockets_open ${this.live}`,
      '# HELP cacheward_websockets_total Responses WebSockets relayed since start.',
      '# TYPE cacheward_websockets_total counter',
      `cacheward_websockets_total ${this.opened}`,
      '# HELP cacheward_websocket_frames_total WebSocket messages relayed, by the side that sent them.',
      '# TYPE cacheward_websocket_frames_total counter',
      `cacheward_websocket_frames_total{from="client"} ${this.frames.client}`,
      `cacheward_websocket_frames_total{from="upstream"} ${this.frames.upstream}`,
      '',
    ].join('\n');
  }

  private newId(): string {
    return `cw_${this.deps.clock.now().toString(36)}${randomBytes(5).toString('hex')}`;
  }

  /** Both sockets open: frames each way as they came, the exchanges beside them. */
  private relay(req: IncomingMessage, client: WebSocket, upstream: WebSocket, record: boolean): void {
    this.opened++;
    this.live++;
    this.sockets.add(client).add(upstream);
    const requestHeaders = webHeaders(req.headers);
    const pending: Pending[] = [];
    let closedBy: 'client' | 'upstream' | undefined;
    let closeNote = '';

    const pipe = (from: WebSocket, to: WebSocket, side: 'client' | 'upstream') => {
      from.on('message', (data: Buffer, isBinary: boolean) => {
        this.frames[side]++;
        if (to.readyState === WebSocket.OPEN) {
          to.send(data, { binary: isBinary }, () => {
            if (from.isPaused && to.bufferedAmount < HIGH_WATER / 4) from.resume();
          });
          if (to.bufferedAmount > HIGH_WATER) from.pause();
        }
        if (!record) return;
        if (side === 'client') this.fromClient(data, isBinary, pending, requestHeaders);
        else this.fromUpstream(data, pending, requestHeaders);
      });
    };
    pipe(client, upstream, 'client');
    pipe(upstream, client, 'upstream');

    const ended = (side: 'client' | 'upstream', code: number, reason: Buffer) => {
      this.sockets.delete(side === 'client' ? client : upstream);
      const other = side === 'client' ? upstream : client;
      if (!closedBy) {
        this.live--;
        closedBy = side;
        closeNote = `code ${code}${reason.length ? `, ${reason.toString('utf8').slice(0, 200)}` : ''}`;
      }
      // The other side sees the same close: a reset (1006, no close frame) as a reset.
      if (other.readyState === WebSocket.OPEN || other.readyState === WebSocket.CONNECTING) {
        if (code === 1006) other.terminate();
        else if (code === 1005) other.close();
        else other.close(code, reason);
      }
      for (const p of pending.splice(0)) {
        this.finishExchange(p, requestHeaders, {
          outcome: closedBy === 'client' ? 'client_aborted' : 'upstream_reset',
          ...(closedBy === 'upstream'
            ? { error: `the upstream closed the WebSocket (${closeNote}) before the response ended` }
            : {}),
        });
      }
    };
    client.on('close', (code, reason) => ended('client', code, reason));
    upstream.on('close', (code, reason) => {
      if (code === 1006) this.deps.metrics.upstreamError('openai');
      ended('upstream', code, reason);
    });
    // A protocol error (a frame over the limit, a bad frame) closes that socket; its 'close' follows.
    client.on('error', () => {});
    upstream.on('error', () => {});
  }

  /** A client frame: a `response.create` opens an exchange; a frame that is not JSON is recorded as such. */
  private fromClient(data: Buffer, isBinary: boolean, pending: Pending[], headers: Headers): void {
    const start = this.deps.clock.now();
    let type = LEADING_TYPE.exec(data.toString('utf8', 0, Math.min(data.length, 256)))?.[1];
    if (type === undefined) {
      try {
        const value: unknown = JSON.parse(data.toString('utf8'));
        type =
          value && typeof value === 'object' && !Array.isArray(value)
            ? String((value as { type?: unknown }).type ?? '')
            : '';
      } catch {
        this.record(
          {
            id: this.newId(),
            start,
            forwarded: data,
            outcome: 'unparsable',
            parseError: `a WebSocket ${isBinary ? 'binary' : 'text'} message that is not JSON (${data.length} bytes); relayed as it came`,
          },
          headers,
        );
        return;
      }
    }
    if (type !== 'response.create') return;
    const p: Pending = {
      id: this.newId(),
      start,
      forwarded: data,
      bytes: 0,
      reader: createStreamReader('openai-responses', (e) => {
        const d = e.data;
        if (d && typeof d === 'object' && !Array.isArray(d)) {
          const status = (d as { status?: unknown }).status;
          p.last = {
            type: String((d as { type?: unknown }).type ?? ''),
            ...(typeof status === 'number' ? { status } : {}),
          };
        }
      }),
    };
    pending.push(p);
    this.pendingCount++;
    this.responses++;
  }

  /** An upstream frame: read by the oldest open exchange's stream reader; a terminal event ends it. */
  private fromUpstream(data: Buffer, pending: Pending[], headers: Headers): void {
    const p = pending[0];
    if (!p) return;
    p.firstByte ??= this.deps.clock.now();
    p.bytes += data.length;
    p.last = undefined;
    try {
      // The reader reads server-sent events: each line of the message becomes a `data:` line of one event.
      p.reader.push(`data: ${data.toString('utf8').replace(/\r\n|\r|\n/g, '\ndata: ')}\n\n`);
    } catch {
      // Not JSON: the event is relayed regardless, and the record says the stream could not be read.
      p.last = { type: '' };
    }
    const last = p.last as Pending['last'];
    if (!last || !TERMINAL.has(last.type)) return;
    pending.shift();
    const status = last.type === 'error' ? (last.status ?? 200) : 200;
    this.finishExchange(p, headers, { status, outcome: status >= 400 ? 'error' : 'complete' });
  }

  private finishExchange(
    p: Pending,
    headers: Headers,
    how: { status?: number; outcome: string; error?: string },
  ): void {
    this.pendingCount--;
    let summary: ReturnType<StreamReader['end']> | undefined;
    let readError: string | undefined;
    try {
      summary = p.reader.end();
    } catch (err) {
      readError = (err as Error).message;
    }
    this.record(
      {
        id: p.id,
        start: p.start,
        forwarded: p.forwarded,
        ...(p.firstByte !== undefined ? { firstByte: p.firstByte } : {}),
        ...how,
        response: {
          stream: true,
          bytes: p.bytes,
          ...(summary ? { summary } : {}),
          ...(readError ? { error: readError } : {}),
        },
      },
      headers,
    );
  }

  /** Hands a finished exchange to the recording path every HTTP exchange takes, after this turn of I/O. */
  private record(
    e: Pick<ExchangeFacts, 'id' | 'start' | 'forwarded' | 'outcome'> & Partial<ExchangeFacts>,
    headers: Headers,
  ): void {
    const end = this.deps.clock.now();
    setImmediate(() => {
      const facts: ExchangeFacts = {
        provider: 'openai',
        route: RESPONSES,
        method: 'POST',
        requestHeaders: headers,
        fixes: [],
        end,
        transport: 'websocket',
        ...e,
      };
      const done = afterResponse(this.deps, facts, undefined).finally(() => this.deps.recording.delete(done));
      this.deps.recording.add(done);
      this.deps.memory.afterLargeBody(facts.forwarded.length);
      this.deps.memory.afterExchange();
    });
  }
}
