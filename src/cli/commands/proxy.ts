// `cacheward proxy`: the capturing proxy. A thin shell over createProxy: it parses options, prints the
// base URL first, and on SIGINT/SIGTERM (or stdout closing) stops taking requests and flushes the capture.
// It never touches traffic itself: everything on the request path is createProxy's.

import type { Command } from 'commander';
import { Option } from 'commander';
import type { CaptureState } from '../../capture/capture-writer.js';
import { lineLogger } from '../../core/logger.js';
import { type LiveRequest, liveLogLine } from '../../proxy/live-analysis.js';
import type { CliIO } from '../io.js';
import { addProxyOptions, type ProxyCliOptions, proxyOptionsFrom, startProxy } from '../proxy-flags.js';
import { runCaptureFiles } from '../run-captures.js';
import { shellQuote } from '../shell-quote.js';
import { waitForStop } from '../stop-signal.js';

export function registerProxy(program: Command, io: CliIO, setExit: (code: number) => void): void {
  addProxyOptions(
    program
      .command('proxy')
      .description(
        'forward Anthropic and OpenAI traffic, capture every exchange, and (with --fix) keep the prefix stable',
      ),
    '8377',
  )
    .option('--quiet', 'no line per finished request')
    .addOption(
      new Option(
        '--log <format>',
        'one line per finished request: text (default on a terminal) or json lines',
      ).choices(['text', 'json']),
    )
    .addHelpText(
      'after',
      '\nPoint your agent at it: ANTHROPIC_BASE_URL=http://127.0.0.1:8377  OPENAI_BASE_URL=http://127.0.0.1:8377/v1\n(or let `cacheward run -- COMMAND` do it). Watch it live at http://127.0.0.1:8377/_cacheward/ (GET /_cacheward/health and /_cacheward/metrics report on it too).\nCredentials pass upstream untouched and are never written.',
    )
    .action(async (opts: ProxyCliOptions & { quiet?: boolean; log?: 'text' | 'json' }) => {
      // One line per finished request, with its cause (computed after the response, by the analyzer).
      const format = opts.quiet ? undefined : (opts.log ?? (process.stderr.isTTY ? 'text' : undefined));
      const lines = lineLogger<LiveRequest>('cacheward proxy', (l) => io.err(l));
      // The files this proxy writes (its pid is in their names), for the report command it ends with.
      const captures = runCaptureFiles(opts.dir ? { dir: opts.dir } : {});
      await captures.before();
      const proxy = await startProxy({
        ...proxyOptionsFrom(opts, (line) => lines.warn?.(line)),
        logger: {
          ...lines,
          ...(format
            ? { request: (row) => io.err(format === 'json' ? JSON.stringify(row) : liveLogLine(row)) }
            : {}),
        },
      });
      // Listening for the stop before the URL is printed: a client that reads it and stops the proxy at once
      // must find the handler there (else SIGTERM's default ends the process with nothing flushed or said).
      const stop = waitForStop();
      const h = proxy.health();
      io.out(`cacheward proxy listening on ${proxy.url}`);
      io.out(
        `  capture: ${h.capture.mode}${h.capture.mode === 'off' ? '' : ` in ${h.capture.dir}`}; fixes: ${h.fixes.length ? h.fixes.join(', ') : 'none'}; upstreams: ${h.upstreams.anthropic} (Anthropic), ${h.upstreams.openai} (OpenAI)`,
      );
      io.out(`  ANTHROPIC_BASE_URL=${proxy.url}  OPENAI_BASE_URL=${proxy.url}/v1`);
      if (h.forward)
        io.out(
          `  forward: HTTPS_PROXY=${proxy.url}  NODE_EXTRA_CA_CERTS=${h.forward.ca}  (opens ${h.forward.openHosts.join(', ')}; tunnels the rest)`,
        );
      io.out(`  live page: ${proxy.url}/_cacheward/`);
      if (h.state.kind === 'redis')
        io.out(
          `  state: ${h.state.url} (prefix ${h.state.prefix}, ${h.state.status}); instance ${h.state.instance}`,
        );
      const reason = await stop;
      await proxy.close();
      const after = proxy.health().capture;
      if (reason !== 'EPIPE' && after.mode !== 'off') {
        // The report command names this proxy's own files: the folder may hold earlier captures too.
        const mine = after.written ? await captures.after() : [];
        const report = `Report on them: cacheward report ${(mine.length ? mine : [after.dir]).map(shellQuote).join(' ')}${h.state.kind === 'redis' ? " (a fleet's conversations span its proxies: give every proxy's capture folder to see them whole)" : ''}`;
        io.err(
          after.written === 0
            ? `cacheward proxy: stopped; nothing captured in ${after.dir}.${lostSentence(after)}`
            : `cacheward proxy: stopped; ${after.written} exchange${after.written === 1 ? '' : 's'} captured in ${after.dir}.${lostSentence(after)} ${report}`,
        );
      }
      setExit(0);
    });
}

/**
 * What the capture writer could not capture, as a sentence for the stop line (empty when nothing was
 * lost): how many, why (its last error), and how many of them no marker on disk counts, which a report
 * on the files can therefore not say.
 */
export function lostSentence(c: CaptureState): string {
  const lost = c.failed + c.dropped;
  if (lost === 0) return '';
  const why = c.error ? ` (last error: ${c.error})` : c.failed ? '' : ' (the capture queue was full)';
  const unmarked =
    c.unmarked === 0
      ? ''
      : c.unmarked === lost
        ? '; the files hold no mark of them, so a report cannot count them'
        : `; ${c.unmarked} of them have no mark in the files, so a report counts only ${lost - c.unmarked}`;
  return ` ${lost} exchange${lost === 1 ? ' was' : 's were'} not captured${why}${unmarked}.`;
}
