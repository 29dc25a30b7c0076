// `cacheward watch [PATH…]`: the agents' transcripts followed as they are written, with the proxy's live page,
// log line and metrics, and no proxy in the path. A thin shell over startWatch: options, the URL first, the stop.

import type { Command } from 'commander';
import { Option } from 'commander';
import { InputError } from '../../core/errors.js';
import { type LiveRequest, liveLogLine } from '../../proxy/live-analysis.js';
import { tuneHeapForAnalysis } from '../../report/analysis-heap.js';
import { type Agent, agentFolder } from '../../sources/agent-folders.js';
import { DEFAULT_SETTLE_MS, DEFAULT_SINCE_MS, startWatch } from '../../watch/create-watch.js';
import type { CliIO } from '../io.js';
import { parseDuration, parsePort, portInUse } from '../option-values.js';
import { waitForStop } from '../stop-signal.js';
import { prices } from './report.js';

interface WatchCliOptions {
  claudeCode?: boolean;
  codex?: boolean;
  port: string;
  since: string;
  settle: string;
  prices?: string;
  allowHost?: string;
  quiet?: boolean;
  log?: 'text' | 'json';
}

const AGENT_NAMES: Record<Agent, string> = { 'claude-code': 'Claude Code', codex: 'Codex' };

/** The paths to follow: those given and the shortcuts' folders; with neither, both agents' folders. */
function watchPaths(paths: readonly string[], opts: WatchCliOptions): string[] {
  const agents: Agent[] = [
    ...(opts.claudeCode ? (['claude-code'] as const) : []),
    ...(opts.codex ? (['codex'] as const) : []),
  ];
  if (!paths.length && !agents.length) agents.push('claude-code', 'codex');
  return [...paths, ...agents.map((a) => agentFolder(a))];
}

export function registerWatch(program: Command, io: CliIO, setExit: (code: number) => void): void {
  program
    .command('watch')
    .description(
      "follow the agents' own transcripts as they are written: the proxy's live page, log line and metrics, no proxy",
    )
    .argument(
      '[paths...]',
      "transcript folders or files (~/.claude/projects, a project folder, ~/.codex/sessions, one session file); with none, both agents' folders. One that does not exist yet is waited for",
    )
    .option(
      '--claude-code',
      "follow Claude Code's folder ($CLAUDE_CONFIG_DIR/projects, else ~/.claude/projects)",
    )
    .option('--codex', "follow Codex's folder ($CODEX_HOME/sessions, else ~/.codex/sessions)")
    .option('--port <port>', 'port to listen on, on 127.0.0.1 (0 = any free port)', '8378')
    .option(
      '--since <duration>',
      'also show the calls that started this long before the watch did (e.g. 0, 15m, 1h, 2d); earlier calls in the same files are read for context, not shown',
      '1h',
    )
    .option(
      '--settle <duration>',
      'how long a file must stop growing before its half-written last line is read as it is, and a response still open is counted',
      '30s',
    )
    .option('--prices <file>', 'a JSON list of dated price rows that add to or override the built-in table')
    .option(
      '--allow-host <names>',
      'Host names to answer besides localhost and IP literals, comma-separated (others get 403: DNS rebinding)',
    )
    .option('--quiet', 'no line per call')
    .addOption(
      new Option('--log <format>', 'one line per call: text (default on a terminal) or json lines').choices([
        'text',
        'json',
      ]),
    )
    .addHelpText(
      'after',
      '\nThe agent keeps its own base URL: nothing is sent anywhere, and nothing from a transcript is written.\nOpen the live page at http://127.0.0.1:8378/_cacheward/ (GET /_cacheward/state, /_cacheward/metrics and /_cacheward/health too).',
    )
    .action(async (given: string[], opts: WatchCliOptions) => {
      const port = parsePort('--port', opts.port);
      const sinceMs = opts.since === undefined ? DEFAULT_SINCE_MS : parseDuration('--since', opts.since);
      const settleMs = opts.settle === undefined ? DEFAULT_SETTLE_MS : parseDuration('--settle', opts.settle);
      const table = await prices(opts.prices);
      const paths = watchPaths(given, opts);
      // This process analyzes what it reads, as a report does: the report's heap settings (analysis-heap.ts).
      tuneHeapForAnalysis();
      const format = opts.quiet ? undefined : (opts.log ?? (process.stderr.isTTY ? 'text' : undefined));
      let watch: Awaited<ReturnType<typeof startWatch>>;
      try {
        watch = await startWatch({
          paths,
          sinceMs,
          settleMs,
          port,
          prices: table,
          ...(opts.allowHost ? { allowedHosts: opts.allowHost.split(',').map((h) => h.trim()) } : {}),
          logger: {
            info: (line) => io.err(`cacheward watch: ${line}`),
            warn: (line) => io.err(`cacheward watch: warning: ${line}`),
            error: (line) => io.err(`cacheward watch: ${line}`),
            ...(format
              ? {
                  request: (row: LiveRequest) =>
                    io.err(format === 'json' ? JSON.stringify(row) : liveLogLine(row)),
                }
              : {}),
          },
        });
      } catch (err) {
        if (portInUse(err))
          throw new InputError(
            `--port ${port}: already in use (another cacheward watch?); pass another port, or --port 0 for any free one`,
          );
        throw new InputError(`cannot listen on 127.0.0.1:${port}: ${(err as Error).message}`);
      }
      // Listening for the stop before the URL is printed (as the proxy does): a stop right after it is heard.
      const stop = waitForStop();
      io.out(`cacheward watch listening on ${watch.url}`);
      const agents = new Map<string, string>(
        (['claude-code', 'codex'] as const).map((a) => [agentFolder(a), AGENT_NAMES[a]]),
      );
      io.out(`  following: ${paths.map((p) => (agents.has(p) ? `${p} (${agents.get(p)})` : p)).join(', ')}`);
      const since = watch.health().since.replace(/\.\d{3}Z$/, 'Z');
      io.out(
        `  shown: calls that started since ${since} (--since ${opts.since}); earlier calls in the same files are read for context only`,
      );
      io.out(`  live page: ${watch.url}/_cacheward/`);
      watch.start().then(
        () => {
          const t = watch.health().transcripts;
          // Past the bound, the files done for now were let go as they were read: say both counts.
          const following =
            t.files >= t.read
              ? 'following them for new lines'
              : `following ${t.files} of them for new lines (the most followed at once; the others are read again when they change)`;
          io.err(
            `cacheward watch: read ${t.read} transcript${t.read === 1 ? '' : 's'} changed since ${since} (${t.calls.shown} call${t.calls.shown === 1 ? '' : 's'} shown, ${t.calls.context} earlier read for context); ${following}`,
          );
        },
        (err) => io.err(`cacheward watch: reading the transcripts failed: ${(err as Error).message}`),
      );
      const reason = await stop;
      await watch.close();
      if (reason !== 'EPIPE') {
        const t = watch.health().transcripts;
        io.err(`cacheward watch: stopped; ${t.calls.shown} call${t.calls.shown === 1 ? '' : 's'} shown`);
      }
      setExit(0);
    });
}
