// `cacheward proxy`: the capturing proxy. A thin shell over createProxy: it parses options, prints the
// base URL first, and on SIGINT/SIGTERM stops taking requests and flushes the capture.

import { type Command, Option } from 'commander';
import { createProxy } from '../../proxy/create-proxy.js';
import type { CliIO } from '../io.js';
import { InputError } from '../read-request-file.js';

interface ProxyCliOptions {
  port: string;
  host: string;
  upstream?: string;
  anthropicUpstream?: string;
  openaiUpstream?: string;
  capture: 'off' | 'hashes' | 'full';
  dir?: string;
  fix?: string;
  token?: string;
  maxMb?: string;
  ttl: '5m' | '1h';
}

export function registerProxy(program: Command, io: CliIO, setExit: (code: number) => void): void {
  program
    .command('proxy')
    .description(
      'forward Anthropic and OpenAI traffic, capture every exchange, and (with --fix) keep the prefix stable',
    )
    .option('--port <port>', 'port to listen on (0 = any free port)', '8377')
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
    .option('--fix <names>', 'fixes to apply, comma-separated: tools-freeze, tools-sort, pin-reminders, ttl')
    .addOption(new Option('--ttl <ttl>', 'the TTL the ttl fix sets').choices(['5m', '1h']).default('1h'))
    .option('--token <token>', 'require this value in the x-cacheward-token header')
    .addHelpText(
      'after',
      '\nPoint your agent at it: ANTHROPIC_BASE_URL=http://127.0.0.1:8377  OPENAI_BASE_URL=http://127.0.0.1:8377/v1\nGET /_cacheward/health and /_cacheward/metrics report on it. Credentials pass upstream untouched and are never written.',
    )
    .action(async (opts: ProxyCliOptions) => {
      const port = Number(opts.port);
      if (!Number.isInteger(port) || port < 0 || port > 65535)
        throw new InputError(`--port ${opts.port}: not a port number`);
      const maxMb = opts.maxMb === undefined ? undefined : Number(opts.maxMb);
      if (maxMb !== undefined && (!Number.isFinite(maxMb) || maxMb <= 0))
        throw new InputError(`--max-mb ${opts.maxMb}: not a positive number`);
      let proxy: Awaited<ReturnType<typeof createProxy>>;
      try {
        proxy = await createProxy({
          port,
          host: opts.host,
          capture: opts.capture,
          ...(opts.upstream ? { upstream: opts.upstream } : {}),
          ...(opts.anthropicUpstream ? { anthropicUpstream: opts.anthropicUpstream } : {}),
          ...(opts.openaiUpstream ? { openaiUpstream: opts.openaiUpstream } : {}),
          ...(opts.dir ? { dir: opts.dir } : {}),
          ...(maxMb !== undefined ? { maxMb } : {}),
          ...(opts.fix
            ? {
                fixes: opts.fix
                  .split(',')
                  .map((f) => f.trim())
                  .filter(Boolean),
              }
            : {}),
          ...(opts.token ? { token: opts.token } : {}),
          fixTtl: opts.ttl,
          log: (line) => io.err(`cacheward proxy: ${line}`),
        });
      } catch (err) {
        throw new InputError((err as Error).message);
      }
      const h = proxy.health();
      io.out(`cacheward proxy listening on ${proxy.url}`);
      io.out(
        `  capture: ${h.capture.mode}${h.capture.mode === 'off' ? '' : ` in ${h.capture.dir}`}; upstreams: ${h.upstreams.anthropic} (Anthropic), ${h.upstreams.openai} (OpenAI)`,
      );
      io.out(`  ANTHROPIC_BASE_URL=${proxy.url}  OPENAI_BASE_URL=${proxy.url}/v1`);
      await new Promise<void>((resolve) => {
        process.once('SIGINT', resolve);
        process.once('SIGTERM', resolve);
      });
      await proxy.close();
      setExit(0);
    });
}
