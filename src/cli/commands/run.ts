// `cacheward run [options] -- COMMAND…`: the agent under an in-process loopback proxy (--sim: and simulator).
// It exits with the agent's code and summarizes only this run's captures; it never touches the agent's stdio.

import { basename } from 'node:path';
import type { Command } from 'commander';
import { PriceTable } from '../../analyze/price-table.js';
import { lineLogger } from '../../core/logger.js';
import type { CachewardProxy } from '../../proxy/create-proxy.js';
import { analyzePaths } from '../../report/analyze-paths.js';
import { loadPriceFile } from '../../report/price-file.js';
import { createSimulator, type Simulator } from '../../sim/simulator.js';
import { type CliIO, styles } from '../io.js';
import { addProxyOptions, type ProxyCliOptions, proxyOptionsFrom, startProxy } from '../proxy-options.js';
import { InputError } from '../read-request-file.js';
import { runCaptureFiles } from '../run-captures.js';
import { runChild } from '../run-child.js';
import { agentKind, forwardEnv, modePhrase, runMode, transportLine } from '../run-mode.js';
import { runSummary } from '../run-summary.js';
import { loadReplyScript } from '../sim-options.js';

interface RunOptions extends ProxyCliOptions {
  sim?: boolean;
  baseUrl?: boolean;
  script?: string;
  prices?: string;
  summary: boolean;
}

/** Keys the child gets under --sim when it has none: obviously not real, accepted by the simulator. */
export const SIM_ANTHROPIC_KEY = 'cacheward-sim-offline-not-a-real-key';
export const SIM_OPENAI_KEY = 'sk-cacheward-sim-offline-not-a-real-key';

/** The environment the agent runs with: both SDK base URLs on the proxy, and under --sim keys it can use. */
export function agentEnv(base: NodeJS.ProcessEnv, proxyUrl: string, sim: boolean): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    ...base,
    // Claude Code and @anthropic-ai/sdk read ANTHROPIC_BASE_URL; the openai SDK and Codex read OPENAI_BASE_URL.
    ANTHROPIC_BASE_URL: proxyUrl,
    OPENAI_BASE_URL: `${proxyUrl}/v1`,
    CACHEWARD_PROXY_URL: proxyUrl,
  };
  if (sim) {
    if (!env.ANTHROPIC_API_KEY && !env.ANTHROPIC_AUTH_TOKEN) env.ANTHROPIC_API_KEY = SIM_ANTHROPIC_KEY;
    if (!env.OPENAI_API_KEY) env.OPENAI_API_KEY = SIM_OPENAI_KEY;
    // `codex exec` takes its key from CODEX_API_KEY.
    if (!env.CODEX_API_KEY) env.CODEX_API_KEY = env.OPENAI_API_KEY;
    // Offline: Claude Code's telemetry, update checks and error reports have nowhere to go.
    env.CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC ??= '1';
  }
  return env;
}

/**
 * The agent's arguments. Codex ignores OPENAI_BASE_URL for its built-in provider (0.171 looks up
 * api.openai.com regardless), so a codex command, run directly or as `node …/codex.js`, also gets the
 * proxy as a `-c openai_base_url=…` override, unless it sets one itself.
 */
export function agentArgs(command: string, args: readonly string[], proxyUrl: string): string[] {
  const isCodex = (p: string | undefined) =>
    !!p && basename(p).replace(/\.(c?js|mjs|exe|cmd)$/, '') === 'codex';
  const viaNode = /^(node|nodejs)(\.exe)?$/.test(basename(command)) && isCodex(args[0]);
  if ((!isCodex(command) && !viaNode) || args.some((a) => a.includes('openai_base_url'))) return [...args];
  const override = ['-c', `openai_base_url="${proxyUrl}/v1"`];
  return viaNode ? [args[0] as string, ...override, ...args.slice(1)] : [...override, ...args];
}

export function registerRun(program: Command, io: CliIO, setExit: (code: number) => void): void {
  addProxyOptions(
    program
      .command('run')
      .description(
        "run an agent through the proxy, then say what its prompt caching cost (exits with the agent's code)",
      )
      .argument('<command...>', 'the agent and its arguments, after --')
      .passThroughOptions(),
    '0',
  )
    .option('--sim', 'answer from the built-in simulator, in-process: no key, no network')
    .option('--base-url', 'reach Claude Code through its base URL, not the forward proxy (the old way)')
    .option('--script <file>', 'with --sim: scripted replies per conversation (see cacheward sim --help)')
    .option('--prices <file>', 'dated price rows for the summary (format: cacheward prices --help)')
    .option('--no-summary', 'print no summary at the end')
    .addHelpText(
      'after',
      `
Claude Code runs through the forward proxy: HTTPS_PROXY=<proxy> and NODE_EXTRA_CA_CERTS=<the local CA>
(cacheward ca), its base URL untouched (--base-url for the old way). Any other agent runs with
ANTHROPIC_BASE_URL=<proxy> and OPENAI_BASE_URL=<proxy>/v1 (--forward for the forward proxy) and
CACHEWARD_PROXY_URL=<proxy>; codex, which ignores OPENAI_BASE_URL, also gets -c openai_base_url=<proxy>/v1
and uses its Responses WebSocket through it. With --sim, an agent without keys gets placeholder ANTHROPIC_API_KEY,
OPENAI_API_KEY and CODEX_API_KEY, and CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1. stdio is the agent's;
cacheward writes only to stderr. SIGTERM, SIGHUP and SIGUSR2 are passed on; SIGINT and SIGQUIT too
unless stdin is a terminal (Ctrl-C reaches the agent directly). The exit code is the agent's (128 + N
when signal N ended it).

  cacheward run --sim -- claude -p "fix the failing test"
  cacheward run --fix tools-freeze --capture full -- codex exec "summarize this repo"`,
    )
    .action(async (command: string[], opts: RunOptions) => {
      const [cmd, ...args] = command;
      if (!cmd) throw new InputError('say what to run after --, e.g. cacheward run -- claude');
      if (opts.script && !opts.sim)
        throw new InputError('--script: only with --sim (it scripts the simulator)');
      if (opts.sim && (opts.upstream || opts.anthropicUpstream || opts.openaiUpstream))
        throw new InputError('--sim answers every route itself: drop --upstream, or drop --sim');
      const proxyOptions = proxyOptionsFrom(opts, (line) => io.err(`cacheward run: ${line}`));
      // Per agent: Claude Code through the forward proxy, the rest through the base URL (run-mode.ts).
      const agent = agentKind(cmd, args);
      const mode = runMode(agent, { forward: opts.forward === true, baseUrl: opts.baseUrl === true });
      if (mode === 'forward')
        proxyOptions.forward = {
          ...(typeof proxyOptions.forward === 'object' ? proxyOptions.forward : {}),
          ...(opts.sim ? { tunnel: 'loopback' as const } : {}),
        };
      const table = new PriceTable(opts.prices ? await loadPrices(opts.prices) : []);
      const script = opts.script ? await loadReplyScript(opts.script) : undefined;
      const s = styles(io.color);

      let sim: Simulator | undefined;
      let proxy: CachewardProxy | undefined;
      let cleanup = () => {};
      const stop = async () => {
        cleanup();
        await proxy?.close();
        await sim?.close();
      };
      try {
        let upstream: string | undefined;
        if (opts.sim) {
          sim = createSimulator({
            ...(script ? { script } : {}),
            logger: lineLogger('cacheward sim', (l) => io.err(l)),
          });
          upstream = await sim.listen({ host: '127.0.0.1' });
        }
        const captures = runCaptureFiles(proxyOptions);
        await captures.before();
        proxy = await startProxy({
          ...proxyOptions,
          ...(upstream ? { upstream } : {}),
          logger: lineLogger('cacheward proxy', (l) => io.err(l)),
        });
        const h = proxy.health();
        const url = proxy.url;
        let env = agentEnv(process.env, url, !!sim);
        if (mode === 'forward' && h.forward) {
          const f = forwardEnv(env, process.env, url, h.forward.ca, h.forward.openHosts);
          ({ env, cleanup } = f);
          for (const note of f.notes) io.err(s.yellow(`cacheward run: ${note}`));
        }
        const childArgs = mode === 'forward' ? [...args] : agentArgs(cmd, args, url);
        const exit = await runChild(cmd, childArgs, env, () =>
          io.err(
            s.dim(
              `cacheward run: ${basename(cmd)} through ${url}, ${modePhrase(agent, mode)} → ${sim ? 'the simulator (offline)' : `${h.upstreams.anthropic}, ${h.upstreams.openai}`}; capture ${h.capture.mode}${h.capture.mode === 'off' ? '' : ` in ${h.capture.dir}`}${h.fixes.length ? `; fixes ${h.fixes.join(', ')}` : ''}`,
            ),
          ),
        );
        await stop();
        if (opts.summary) {
          io.err('');
          for (const line of await summarize(
            await captures.after(),
            h.capture.mode,
            cmd,
            exit.code,
            table,
            opts,
            io,
            transportLine(mode, proxy.health().websockets),
          ))
            io.err(line);
        }
        setExit(exit.code);
      } catch (err) {
        await stop().catch(() => {});
        throw err;
      }
    });
}

async function loadPrices(file: string) {
  try {
    return await loadPriceFile(file);
  } catch (err) {
    throw new InputError((err as Error).message);
  }
}

/** The summary lines, from the analyzer run over this run's capture files only. */
async function summarize(
  files: string[],
  mode: string,
  cmd: string,
  code: number,
  table: PriceTable,
  opts: RunOptions,
  io: CliIO,
  transport: string,
): Promise<string[]> {
  const s = styles(io.color);
  const ended = s.dim(`${cmd} exited with ${code}.`);
  if (mode === 'off')
    return [ended, 'cacheward run: capture was off, so there is nothing to summarize (use --capture hashes)'];
  if (!files.length)
    return [
      ended,
      s.yellow(
        transport.includes('forward proxy')
          ? `cacheward run: no request went through the proxy: ${cmd} did not use HTTPS_PROXY, or did not trust the local CA (cacheward ca)`
          : `cacheward run: no request went through the proxy: ${cmd} did not use ANTHROPIC_BASE_URL or OPENAI_BASE_URL`,
      ),
    ];
  const result = await analyzePaths(files, {
    prices: table,
    keepRequests: false,
    onWarning: (w) => io.err(`cacheward: warning: ${w}`),
  });
  const command = ['cacheward', 'report', ...files, ...(opts.prices ? ['--prices', opts.prices] : [])];
  return [ended, ...runSummary(result, command, s, 3, transport)];
}
