// `cacheward run [options] -- COMMAND…`: the agent under an in-process loopback proxy (--sim: and simulator).
// It exits with the agent's code (2 if 0 but capture lost some unsaid) and summarizes this run's captures only; never touches its stdio.

import { basename } from 'node:path';
import type { Command } from 'commander';
import { PriceTable } from '../../analyze/price-table.js';
import type { CaptureState } from '../../capture/capture-writer.js';
import { InputError } from '../../core/errors.js';
import { lineLogger } from '../../core/logger.js';
import type { CachewardProxy } from '../../proxy/create-proxy.js';
import { analyzePaths } from '../../report/analyze-paths.js';
import { loadPriceFile } from '../../report/price-file.js';
import { createSimulator, type Simulator } from '../../sim/simulator.js';
import { type EgressAttempt, type EgressGuard, guardedEnv, startEgressGuard } from '../egress-guard.js';
import { EXIT_USAGE } from '../exit-codes.js';
import { type CliIO, styles } from '../io.js';
import { addProxyOptions, type ProxyCliOptions, proxyOptionsFrom, startProxy } from '../proxy-flags.js';
import { runCaptureFiles } from '../run-captures.js';
import { runChild } from '../run-child.js';
import { agentKind, forwardEnv, modePhrase, runMode, transportLine } from '../run-mode.js';
import { runSummary } from '../run-summary.js';
import { shellQuote } from '../shell-quote.js';
import { createSimAgentHomes, type SimAgentHomes } from '../sim-agent-homes.js';
import { loadReplyScript } from '../sim-options.js';

interface RunOptions extends ProxyCliOptions {
  sim?: boolean;
  baseUrl?: boolean;
  script?: string;
  agentHome?: string;
  prices?: string;
  summary: boolean;
}

/** Keys the child gets under --sim when it has none: obviously not real, accepted by the simulator. */
export const SIM_ANTHROPIC_KEY = 'cacheward-sim-offline-not-a-real-key';
export const SIM_OPENAI_KEY = 'sk-cacheward-sim-offline-not-a-real-key';

/** What `--sim` adds to the agent's environment: the egress guard's URL and the agents' own homes. */
export interface SimEnv {
  guardUrl: string;
  codexHome: string;
  claudeHome: string;
}

/**
 * The environment the agent runs with: both SDK base URLs on the proxy. Under --sim (`offline`) also
 * placeholder keys in place of any real ones (the simulator takes any key, and a real one has nowhere to
 * go offline), a CODEX_HOME whose config points Codex at the proxy, a CLAUDE_CONFIG_DIR of the run's own
 * (a simulated session never lands among the user's), and HTTP(S)_PROXY on the egress guard, so whatever
 * ignores the base URLs is refused rather than sent.
 */
export function agentEnv(
  base: NodeJS.ProcessEnv,
  proxyUrl: string,
  offline: SimEnv | false,
): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    ...base,
    // Claude Code and @anthropic-ai/sdk read ANTHROPIC_BASE_URL; the openai SDK reads OPENAI_BASE_URL.
    ANTHROPIC_BASE_URL: proxyUrl,
    OPENAI_BASE_URL: `${proxyUrl}/v1`,
    CACHEWARD_PROXY_URL: proxyUrl,
  };
  if (offline) {
    delete env.ANTHROPIC_AUTH_TOKEN;
    env.ANTHROPIC_API_KEY = SIM_ANTHROPIC_KEY;
    env.OPENAI_API_KEY = SIM_OPENAI_KEY;
    // `codex exec` takes its key from CODEX_API_KEY.
    env.CODEX_API_KEY = SIM_OPENAI_KEY;
    env.CODEX_HOME = offline.codexHome;
    env.CLAUDE_CONFIG_DIR = offline.claudeHome;
    Object.assign(env, guardedEnv(offline.guardUrl));
    // Offline: Claude Code's telemetry, update checks and error reports have nowhere to go.
    env.CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC ??= '1';
  }
  return env;
}

/** `codex`, `…/codex.js`, `@openai/codex`, `@openai/codex@0.171.0`: Codex, by its name or its package's. */
function isCodex(p: string | undefined): boolean {
  if (!p) return false;
  if (/^@openai\/codex(@[^/\s]+)?$/.test(p)) return true;
  return basename(p).replace(/\.(c?js|mjs|exe|cmd)$/, '') === 'codex';
}

/** Commands that run another one named among their arguments: node, npx, pnpm dlx, yarn dlx, bunx, npm exec. */
const LAUNCHERS = /^(node|nodejs|npx|pnpx|pnpm|yarn|bunx|bun|npm)(\.exe|\.cmd)?$/;

/**
 * The agent's arguments. Codex ignores OPENAI_BASE_URL for its built-in provider (0.171 looks up
 * api.openai.com regardless), so a codex command, run directly or through a launcher (`node …/codex.js`,
 * `npx codex`, `npx @openai/codex@0.171.0`, `pnpm dlx`, `bunx`), also gets the proxy as a
 * `-c openai_base_url=…` override after its name, unless it sets one itself. (Under --sim its CODEX_HOME
 * says the same, for a Codex started any other way, a wrapper script say.)
 */
export function agentArgs(command: string, args: readonly string[], proxyUrl: string): string[] {
  if (args.some((a) => a.includes('openai_base_url'))) return [...args];
  const override = ['-c', `openai_base_url="${proxyUrl}/v1"`];
  if (isCodex(command)) return [...override, ...args];
  if (!LAUNCHERS.test(basename(command))) return [...args];
  // The first argument that is no option of the launcher's and names Codex (options come before it).
  const at = args.findIndex((a) => !a.startsWith('-') && isCodex(a));
  const before = args.slice(0, Math.max(0, at));
  const plain = before.every((a) => a.startsWith('-') || a === 'dlx' || a === 'exec' || a === 'x');
  if (at < 0 || !plain) return [...args];
  return [...args.slice(0, at + 1), ...override, ...args.slice(at + 1)];
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
    .option(
      '--agent-home <dir>',
      "with --sim: keep the agents' config and transcripts in DIR (else a folder removed after the run)",
    )
    .option('--prices <file>', 'dated price rows for the summary (format: cacheward prices --help)')
    .option('--no-summary', 'print no summary at the end')
    .addHelpText(
      'after',
      `
Claude Code runs through the forward proxy: HTTPS_PROXY=<proxy> and NODE_EXTRA_CA_CERTS=<the local CA>
(cacheward ca), its base URL untouched (--base-url for the old way). Any other agent runs with
ANTHROPIC_BASE_URL=<proxy> and OPENAI_BASE_URL=<proxy>/v1 (--forward for the forward proxy) and
CACHEWARD_PROXY_URL=<proxy>; codex, which ignores OPENAI_BASE_URL, also gets -c openai_base_url=<proxy>/v1
when it is the command or is named after a launcher (node, npx, pnpm dlx, bunx), and uses its Responses
WebSocket through it. With --sim nothing it sends leaves this machine: placeholder ANTHROPIC_API_KEY, OPENAI_API_KEY and
CODEX_API_KEY in place of any real ones, a fresh CODEX_HOME whose config.toml points Codex at the proxy
(however it is started: npx, a path, a wrapper script) and a fresh CLAUDE_CONFIG_DIR (your own settings,
history and transcripts are neither read nor written; both are removed after the run unless
--agent-home DIR keeps them there, for cacheward report DIR), HTTP_PROXY/HTTPS_PROXY/ALL_PROXY on a loopback
guard that refuses every connection with a message (the summary lists them; NO_PROXY keeps loopback
direct; in forward mode the forward proxy itself tunnels loopback only), and CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1. A client that ignores both its base URL and the
proxy variables is not contained by its environment. stdio is the agent's;
cacheward writes only to stderr. SIGTERM, SIGHUP and SIGUSR2 are passed on; SIGINT and SIGQUIT too
unless stdin is a terminal (Ctrl-C reaches the agent directly). The exit code is the agent's (128 + N
when signal N ended it), or 2 when the agent exited 0 but exchanges were not captured and the disk had no
room even to mark them (a full disk to the end): the summary covers only what was captured and says how
many were not.

  cacheward run --sim -- claude -p "fix the failing test"
  cacheward run --fix tools-freeze --capture full -- codex exec "summarize this repo"`,
    )
    .action(async (command: string[], opts: RunOptions) => {
      const [cmd, ...args] = command;
      if (!cmd) throw new InputError('say what to run after --, e.g. cacheward run -- claude');
      if (opts.script && !opts.sim)
        throw new InputError('--script: only with --sim (it scripts the simulator)');
      if (opts.agentHome !== undefined && !opts.sim)
        throw new InputError(
          '--agent-home: only with --sim (without it the agents run with their own homes)',
        );
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
      let guard: EgressGuard | undefined;
      let homes: SimAgentHomes | undefined;
      let cleanup = () => {};
      const stop = async () => {
        cleanup();
        await proxy?.close();
        await sim?.close();
        await guard?.close();
        await homes?.remove();
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
        if (sim) {
          guard = await startEgressGuard();
          homes = await createSimAgentHomes(url, opts.agentHome);
        }
        const offline =
          guard && homes ? { guardUrl: guard.url, codexHome: homes.codex, claudeHome: homes.claude } : false;
        let env = agentEnv(process.env, url, offline);
        if (mode === 'forward' && h.forward) {
          // The forward proxy takes HTTPS_PROXY over from the egress guard: under --sim it tunnels loopback only.
          const f = forwardEnv(env, process.env, url, h.forward.ca, h.forward.openHosts);
          ({ env, cleanup } = f);
          for (const note of f.notes) io.err(s.yellow(`cacheward run: ${note}`));
        }
        const childArgs = mode === 'forward' ? [...args] : agentArgs(cmd, args, url);
        const exit = await runChild(cmd, childArgs, env, () =>
          io.err(
            s.dim(
              `cacheward run: ${basename(cmd)} through ${url}, ${modePhrase(agent, mode)} → ${sim ? 'the simulator (offline: anything else it connects to is refused)' : `${h.upstreams.anthropic}, ${h.upstreams.openai}`}; capture ${h.capture.mode}${h.capture.mode === 'off' ? '' : ` in ${h.capture.dir}`}${h.fixes.length ? `; fixes ${h.fixes.join(', ')}` : ''}`,
            ),
          ),
        );
        const refused = guard?.attempts() ?? [];
        await stop();
        // What the capture writer lost (a full disk): the summary says it. Lost with no marker in the files
        // (the disk full to the end), a later report would look clean: an agent that succeeded does not make
        // the run look so either (exit 2, docs/cli.md); an agent's own failure keeps its code.
        const capture = proxy.health().capture;
        const lost = capture.failed + capture.dropped;
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
            capture,
            sim ? refused : undefined,
          ))
            io.err(line);
          if (homes?.kept)
            io.err(`  the agents' own transcripts: cacheward report ${shellQuote(homes.root)}`);
        } else if (lost) io.err(s.yellow(`cacheward run: ${notCapturedSentence(capture)}`));
        setExit(exit.code === 0 && capture.unmarked ? EXIT_USAGE : exit.code);
      } catch (err) {
        await stop().catch(() => {});
        throw err;
      }
    });
}

/** The exchanges the capture writer lost, as a sentence: how many, and its last error. */
function notCapturedSentence(c: CaptureState): string {
  const lost = c.failed + c.dropped;
  // Lost to the disk (a write failed), or dropped because the writer fell behind a burst (no error).
  const advice = c.failed
    ? 'free disk space and run again for a whole summary'
    : 'the capture fell behind a burst of traffic (a slow disk); the summary covers what it kept';
  return `${lost} exchange${lost === 1 ? ' was' : 's were'} not captured${c.error ? ` (${c.error})` : ''}; ${advice}`;
}

async function loadPrices(file: string) {
  try {
    return await loadPriceFile(file);
  } catch (err) {
    throw new InputError((err as Error).message);
  }
}

/**
 * The summary lines, from the analyzer run over this run's capture files only. `refused` (under --sim):
 * where the agent tried to go past the proxy, each refused by the egress guard.
 */
async function summarize(
  files: string[],
  mode: string,
  cmd: string,
  code: number,
  table: PriceTable,
  opts: RunOptions,
  io: CliIO,
  transport: string,
  capture: CaptureState,
  refused?: EgressAttempt[],
): Promise<string[]> {
  const s = styles(io.color);
  const ended = s.dim(`${cmd} exited with ${code}.`);
  const out = [ended];
  if (refused?.length)
    out.push(
      s.yellow(
        `cacheward run: refused what ${basename(cmd)} tried to send past the proxy (--sim is offline): ${refused.map((a) => `${a.target}${a.count > 1 ? ` ×${a.count}` : ''}`).join(', ')}`,
      ),
    );
  if (mode === 'off')
    return [
      ...out,
      'cacheward run: capture was off, so there is nothing to summarize (use --capture hashes)',
    ];
  const lost = capture.failed + capture.dropped;
  if (!files.length && lost)
    return [...out, s.yellow(`cacheward run: nothing to summarize: ${notCapturedSentence(capture)}`)];
  if (!files.length) {
    if (refused?.length) return [...out, s.yellow('cacheward run: no request reached the proxy')];
    return [
      ...out,
      s.yellow(
        refused
          ? `cacheward run: ${basename(cmd)} sent nothing: no request reached the proxy, and none tried to leave this machine`
          : transport.includes('forward proxy')
            ? `cacheward run: no request reached the proxy: ${basename(cmd)} sent nothing through HTTPS_PROXY, or did not trust the local CA (cacheward ca)`
            : `cacheward run: no request reached the proxy: ${basename(cmd)} sent nothing to ANTHROPIC_BASE_URL or OPENAI_BASE_URL`,
      ),
    ];
  }
  const result = await analyzePaths(files, {
    prices: table,
    keepRequests: false,
    onWarning: (w) => io.err(`cacheward: warning: ${w}`),
  });
  // This writer's count covers its markers in these files and those the disk refused too.
  result.generatedFrom.notCaptured = Math.max(result.generatedFrom.notCaptured ?? 0, lost);
  const command = ['cacheward', 'report', ...files, ...(opts.prices ? ['--prices', opts.prices] : [])];
  return [...out, ...runSummary(result, command, s, 3, transport, capture.unmarked)];
}
