// The flags `cacheward proxy` and `cacheward run` share, parsed into createProxy options, and starting it.
// Every value is checked before anything listens; a failure to start is one line, never a stack trace.

import { type Command, Option } from 'commander';
import { defaultCaptureDir } from '../capture/default-dir.js';
import { InputError } from '../core/errors.js';
import type { ListenOptions } from '../core/listen.js';
import { ttlFix } from '../fixes/ttl.js';
import { type CachewardProxy, createProxy, type ProxyOptions } from '../proxy/create-proxy.js';
import { defaultCaDir } from '../proxy/local-ca.js';
import { fullCollect } from '../proxy/memory-release.js';
import { tuneHeapForProxy } from '../proxy/proxy-heap.js';
import { warmUpProxy } from '../proxy/warm-up.js';
import { OtlpConfigError, otlpOptions } from '../telemetry/otlp-config.js';
import { refuseFileAsFolder } from './folder-option.js';
import { parsePort, parseUpstream, portInUse } from './option-values.js';
import { resolveToken, TOKEN_ENV } from './proxy-token.js';

/** The proxy options as commander hands them over. */
export interface ProxyCliOptions {
  port: string;
  host: string;
  upstream?: string;
  anthropicUpstream?: string;
  openaiUpstream?: string;
  capture: 'off' | 'hashes' | 'full';
  dir?: string;
  fix?: string;
  token?: string;
  tokenFile?: string;
  allowHost?: string;
  allowOrigin?: string;
  maxMb?: string;
  ttl: '5m' | '1h';
  state: string;
  statePrefix: string;
  stateTimeoutMs: string;
  otlp?: string;
  /** `--no-warm-up` sets it false. */
  warmUp: boolean;
  /** `--forward`: also an HTTPS forward proxy (CONNECT, the local CA). */
  forward?: boolean;
  openHost?: string;
  caDir?: string;
}

/** Declares the proxy's options on a command. */
export function addProxyOptions(cmd: Command, defaultPort: string): Command {
  return cmd
    .option('--port <port>', 'port to listen on (0 = any free port)', defaultPort)
    .option('--host <host>', 'address to bind; anything but loopback requires --token', '127.0.0.1')
    .option('--upstream <url>', 'one upstream for every route (e.g. a `cacheward sim`)')
    .option('--anthropic-upstream <url>', 'upstream for /v1/messages (default https://api.anthropic.com)')
    .option(
      '--openai-upstream <url>',
      'upstream for /v1/chat/completions and /v1/responses (default https://api.openai.com)',
    )
    .addOption(
      new Option('--capture <mode>', 'what to record').choices(['off', 'hashes', 'full']).default('hashes'),
    )
    .option('--dir <dir>', 'capture folder (default $XDG_STATE_HOME/cacheward or ~/.local/state/cacheward)')
    .option('--max-mb <n>', 'bound on the capture folder; the oldest files go first')
    .option(
      '--fix <names>',
      'fixes to apply, comma-separated: tools-freeze, tools-sort, pin-reminders, ttl, strip-billing-header',
    )
    .addOption(new Option('--ttl <ttl>', 'the TTL the ttl fix sets').choices(['5m', '1h']).default('1h'))
    .option(
      '--token <token>',
      `require this value in the x-cacheward-token header (visible in ps: prefer ${TOKEN_ENV} or --token-file)`,
    )
    .option('--token-file <file>', 'read the token from this file (one line)')
    .option(
      '--allow-host <names>',
      'Host names to answer besides localhost and IP literals, comma-separated (others get 403: DNS rebinding)',
    )
    .option(
      '--allow-origin <origins>',
      'web origins whose pages may send through the proxy (a browser app you run, e.g. http://localhost:5173), comma-separated; other pages get 403',
    )
    .option(
      '--state <where>',
      'conversations and fix state: memory (and a state file), or redis://HOST:PORT[/DB] shared by a fleet',
      'memory',
    )
    .option('--state-prefix <prefix>', 'Redis key prefix (one per fleet)', 'cacheward:')
    .option(
      '--state-timeout-ms <ms>',
      'how long Redis may send nothing back before a waiting request goes out unfixed (raised to follow slow round trips; a slow Redis that answers is waited for)',
      '1000',
    )
    .option(
      '--otlp <url>',
      'export a span and metric points per request over OTLP/HTTP (default $OTEL_EXPORTER_OTLP_ENDPOINT)',
    )
    .option(
      '--no-warm-up',
      'skip the start-up warm-up (a few generated exchanges through a throwaway proxy, so the first real one runs warm)',
    )
    .option(
      '--forward',
      'also an HTTPS forward proxy (HTTPS_PROXY): opens the provider API hosts with a local CA, tunnels the rest',
    )
    .option('--open-host <names>', 'with --forward: more hosts to open and capture, comma-separated')
    .option('--ca-dir <dir>', 'the local CA folder (default $XDG_STATE_HOME/cacheward/ca; see cacheward ca)');
}

/** createProxy options, where to listen and whether to warm up first, as the CLI gathers them. */
export type CliProxyOptions = ProxyOptions & ListenOptions & { warmUp?: boolean };

/**
 * Checks the options and turns them into createProxy options and where to listen (everything but `logger`
 * and `clock`). The token comes from --token-file, CACHEWARD_TOKEN or --token; `warn` hears that --token
 * shows in ps.
 */
export function proxyOptionsFrom(
  opts: ProxyCliOptions,
  warn: (line: string) => void = () => {},
): CliProxyOptions {
  const port = parsePort('--port', opts.port);
  const maxMb = opts.maxMb === undefined ? undefined : Number(opts.maxMb);
  if (maxMb !== undefined && (!Number.isFinite(maxMb) || maxMb <= 0))
    throw new InputError(`--max-mb ${opts.maxMb}: not a positive number`);
  const stateTimeoutMs = Number(opts.stateTimeoutMs);
  if (!Number.isFinite(stateTimeoutMs) || stateTimeoutMs < 1 || stateTimeoutMs > 60_000)
    throw new InputError(
      `--state-timeout-ms ${opts.stateTimeoutMs}: a number of milliseconds from 1 to 60000`,
    );
  let otlp: ProxyOptions['otlp'];
  try {
    otlp = otlpOptions(opts.otlp, process.env);
  } catch (err) {
    if (err instanceof OtlpConfigError) throw new InputError(err.message);
    throw err;
  }
  const fixes = (opts.fix ?? '')
    .split(',')
    .map((f) => f.trim())
    .filter(Boolean);
  const { token, warning } = resolveToken({ token: opts.token, tokenFile: opts.tokenFile });
  if (warning) warn(warning);
  const allowedHosts = (opts.allowHost ?? '')
    .split(',')
    .map((h) => h.trim())
    .filter(Boolean);
  const openHosts = (opts.openHost ?? '')
    .split(',')
    .map((h) => h.trim())
    .filter(Boolean);
  if (openHosts.length && !opts.forward) throw new InputError('--open-host: only with --forward');
  // The folders it would write to (captures, the state file under them, the local CA): a file in the way is
  // refused now; a folder it cannot write at run time is a degraded capture instead (docs/proxy.md).
  if (opts.dir !== undefined) refuseFileAsFolder('--dir', opts.dir);
  else if (opts.capture !== 'off' || fixes.length)
    refuseFileAsFolder(
      'the default capture folder',
      defaultCaptureDir(),
      'move it away, or pass --dir FOLDER',
    );
  if (opts.caDir !== undefined) refuseFileAsFolder('--ca-dir', opts.caDir);
  else if (opts.forward)
    refuseFileAsFolder('the default CA folder', defaultCaDir(), 'move it away, or pass --ca-dir FOLDER');
  const allowedOrigins = (opts.allowOrigin ?? '')
    .split(',')
    .map((o) => o.trim())
    .filter(Boolean);
  return {
    port,
    host: opts.host,
    capture: opts.capture,
    ...(opts.upstream ? { upstream: parseUpstream('--upstream', opts.upstream) } : {}),
    ...(opts.anthropicUpstream
      ? { anthropicUpstream: parseUpstream('--anthropic-upstream', opts.anthropicUpstream) }
      : {}),
    ...(opts.openaiUpstream
      ? { openaiUpstream: parseUpstream('--openai-upstream', opts.openaiUpstream) }
      : {}),
    ...(opts.dir ? { dir: opts.dir } : {}),
    ...(maxMb !== undefined ? { maxMb } : {}),
    // The ttl fix's lifetime is the fix's own option: `--fix ttl --ttl 5m` is ttlFix('5m').
    ...(fixes.length ? { fixes: fixes.map((f) => (f === 'ttl' ? ttlFix(opts.ttl) : f)) } : {}),
    ...(token ? { token } : {}),
    ...(allowedHosts.length ? { allowedHosts } : {}),
    ...(allowedOrigins.length ? { allowedOrigins } : {}),
    state: opts.state,
    statePrefix: opts.statePrefix,
    stateTimeoutMs,
    ...(otlp ? { otlp } : {}),
    warmUp: opts.warmUp !== false,
    ...(opts.forward
      ? {
          forward: {
            ...(openHosts.length ? { openHosts } : {}),
            ...(opts.caDir ? { caDir: opts.caDir } : {}),
          },
        }
      : {}),
  };
}

/**
 * Creates the proxy (an unknown fix or a bad upstream is refused here, before any warm-up), warms up (unless
 * `warmUp` is false) and listens; a port in use or a refused configuration is an InputError. A warm-up that
 * fails is one info line: the start goes on.
 */
export async function startProxy(options: CliProxyOptions): Promise<CachewardProxy> {
  const { port, host, warmUp, ...rest } = options;
  // This process is a proxy from here: a heap sized for that (see proxy-heap.ts).
  tuneHeapForProxy();
  let proxy: CachewardProxy;
  try {
    // The process is the proxy's own: it gives memory back after large bodies and when idle.
    proxy = createProxy({ ...rest, releaseMemory: true });
  } catch (err) {
    throw new InputError((err as Error).message);
  }
  if (warmUp !== false) {
    // SIGINT or SIGTERM now stops the warm-up, which removes its folder, then ends the process as the
    // signal would have (nothing listens yet): killed by it, a temporary folder was left behind.
    const interrupted = new AbortController();
    let signalled: NodeJS.Signals | undefined;
    const onSignal = (signal: NodeJS.Signals) => {
      signalled = signal;
      interrupted.abort();
    };
    process.once('SIGINT', onSignal).once('SIGTERM', onSignal);
    let warmed: Awaited<ReturnType<typeof warmUpProxy>>;
    try {
      warmed = await warmUpProxy({
        ...(rest.capture ? { capture: rest.capture } : {}),
        ...(rest.fixes ? { fixes: rest.fixes } : {}),
        ...(rest.registry ? { registry: rest.registry } : {}),
        signal: interrupted.signal,
      });
    } finally {
      process.off('SIGINT', onSignal).off('SIGTERM', onSignal);
    }
    if (signalled) {
      process.kill(process.pid, signalled);
      throw new InputError(`stopped by ${signalled} before it listened`);
    }
    if (warmed.error !== undefined)
      rest.logger?.info?.(
        `warm-up stopped (${warmed.error}): the first requests run cold (it needs a writable TMPDIR; --no-warm-up skips it)`,
      );
    // What the throwaway proxy and simulator allocated is garbage now: one compacting collection gives its
    // pages back before anything listens (RSS otherwise held while idle).
    fullCollect(true);
  }
  try {
    await proxy.listen({ ...(port !== undefined ? { port } : {}), ...(host !== undefined ? { host } : {}) });
    return proxy;
  } catch (err) {
    if (portInUse(err))
      throw new InputError(
        `--port ${port}: already in use (another cacheward proxy?); pass another port, or --port 0 for any free one`,
      );
    throw new InputError((err as Error).message);
  }
}
