// The proxy's public option, health and handle types, and the error a configuration that cannot be served
// throws. Types and constants only: it must never open a socket, a file or a state store.

import type { PriceTable } from '../analyze/price-table.js';
import type { CaptureState } from '../capture/capture-writer.js';
import type { Clock } from '../core/clock.js';
import { CachewardError } from '../core/errors.js';
import type { Listening, ListenOptions } from '../core/listen.js';
import type { Logger } from '../core/logger.js';
import type { Fix, FixRegistry } from '../fixes/fix.js';
import type { CaptureMode } from '../record/capture-record.js';
import type { FixStateHealth } from '../state/fix-state-open.js';
import type { StateHealth } from '../state/proxy-state.js';
import type { OtlpOptions } from '../telemetry/start-telemetry.js';
import type { ForwardOptions, TunnelPolicy } from './forward-proxy.js';
import type { LiveAnalysis, LiveRequest } from './live-analysis.js';
import type { ProcessMemory } from './memory-release.js';

export const DEFAULT_ANTHROPIC_UPSTREAM = 'https://api.anthropic.com';
export const DEFAULT_OPENAI_UPSTREAM = 'https://api.openai.com';

/** Options for {@link createProxy}. */
export interface ProxyOptions {
  /** One upstream for every route (e.g. the simulator). */
  upstream?: string;
  anthropicUpstream?: string;
  openaiUpstream?: string;
  /** `off`, `hashes` (default: no prompt text kept) or `full` (exact bytes, stored as deltas). */
  capture?: CaptureMode;
  /** Capture folder; default `$XDG_STATE_HOME/cacheward` or `~/.local/state/cacheward`. */
  dir?: string;
  /** Bound on the capture folder's size in MB; the oldest files go first. */
  maxMb?: number;
  /**
   * Fixes by name (see `cacheward proxy --help`), or fix objects; they run in the registry's order. A fix
   * with options is its factory's object: `fixes: ['tools-freeze', ttlFix('5m')]` (`ttl` alone is 1h).
   */
  fixes?: ReadonlyArray<string | Fix>;
  /** Where names are looked up (default the built-in fixes, `fixRegistry()`). */
  registry?: FixRegistry;
  /** Where the conversation index and fix state are kept across restarts (default `<dir>/state`). */
  stateDir?: string;
  /** `memory` (default: memory and the state file) or `redis://HOST:PORT[/DB]`, shared by a fleet. */
  state?: string;
  /** Redis key prefix (default `cacheward:`). */
  statePrefix?: string;
  /** How long Redis may send nothing back before a waiting request goes out unfixed, in ms (default 1000). */
  stateTimeoutMs?: number;
  /** OTLP/HTTP export: a base URL (`/v1/traces` and `/v1/metrics` are added) or options. */
  otlp?: string | OtlpOptions;
  /** The clock every timestamp comes from. Default: the system clock. */
  clock?: Clock;
  /** Required in the `x-cacheward-token` header of every request when set; needed to bind beyond loopback. */
  token?: string;
  /** Host names served besides loopback names and IP literals (others are refused: DNS rebinding). */
  allowedHosts?: readonly string[];
  /**
   * Web origins (`http://localhost:5173`) whose pages may send through the proxy: a browser app you run
   * yourself. Requests from any other origin's page are refused (403); clients that send no Origin (SDKs,
   * curl, agents) are never affected.
   */
  allowedOrigins?: readonly string[];
  /**
   * Where the proxy says what happened: `warn` (capture or state degraded, a fix failed open), `info`,
   * `error` (a bug: the client got a 500), and `request` with every finished request once the live
   * analysis has named it (the CLI's per-request line). Default: info, warn and error on stderr.
   */
  logger?: Logger<LiveRequest>;
  /** Prices for the live page, log and metrics (default the built-in dated table). */
  prices?: PriceTable;
  /**
   * Also an HTTPS forward proxy (`HTTPS_PROXY` at the proxy): CONNECT to the provider API hosts (and
   * `openHosts`) is opened with a certificate from the local CA and served like base-URL traffic; any other
   * CONNECT is tunneled unread. `true` for the defaults.
   */
  forward?: boolean | ForwardOptions;
  /**
   * Gives memory back to the system with V8 full collections of its own: after a body of many megabytes,
   * and when idle with far more heap committed than live (memory-release.ts). Off by default: a library
   * user's process keeps the collector it has; `cacheward proxy` and `run` turn it on.
   */
  releaseMemory?: boolean;
}

/** A proxy: `await proxy.listen()`, send traffic to `proxy.url`, `await proxy.close()`. */
export interface CachewardProxy extends Listening {
  /**
   * Opens the capture, the state and telemetry, then listens (default 127.0.0.1, any free port); resolves to
   * the base URL. Rejects with ProxyConfigError for an address beyond loopback without `token`, a bad state
   * URL or OTLP address. A proxy listens once: after `close()`, create another.
   */
  listen(at?: ListenOptions): Promise<string>;
  /** Throws `CW_NOT_LISTENING` before `listen()` resolves; after `close()`, the final state. */
  health(): ProxyHealth;
  metrics(): string;
  /** Waits until every capture record so far is on disk (and, with OTLP on, sent to the collector). */
  flush(): Promise<void>;
  /** Every request, analyzed after its response (the live page, the log, OTLP). */
  live: LiveAnalysis;
}

export interface ProxyHealth {
  status: 'ok' | 'degraded';
  version: string;
  upstreams: { anthropic: string; openai: string };
  /** With fixes on: whether their state is kept in files (and survives a restart). */
  fixState?: FixStateHealth;
  capture: CaptureState;
  fixes: string[];
  /**
   * With fixes on: fixed requests the provider refused, by fix. Each time the client's own bytes went out
   * instead, and the fix was withdrawn for that conversation on that model.
   */
  fixRefusals?: Record<string, number>;
  /** Where conversations and fix state live, and whether it answers. */
  state: StateHealth;
  /** OTLP export, when on: where, and what a down collector cost. */
  otlp?: { endpoint: string; instance: string; exported: number; dropped: number };
  /** The process's memory (bytes) and how many conversations the state holds (bounded). */
  memory: ProcessMemory;
  /** Responses WebSockets relayed (in all, open now) and the `response.create`s they carried. */
  websockets: { sockets: number; open: number; responses: number };
  /** Forward mode, when on: the CA certificate to trust, the hosts opened, which tunnels are made. */
  forward?: { ca: string; openHosts: string[]; tunnel: TunnelPolicy };
}

/** A configuration that cannot be served (for example a public address without a token). */
export class ProxyConfigError extends CachewardError {
  constructor(message: string) {
    super('CW_PROXY_CONFIG', message);
  }
}
