// `cacheward sim`: the offline provider simulator on 127.0.0.1. A thin shell over createSimulator:
// it reads the script file, prints the base URL first, and stops cleanly on SIGINT/SIGTERM or when stdout closes.
// It never binds beyond loopback unless --host asks for it.

import { type Command, Option } from 'commander';
import { InputError } from '../../core/errors.js';
import { lineLogger } from '../../core/logger.js';
import { createSimulator } from '../../sim/simulator.js';
import type { CliIO } from '../io.js';
import { parsePort, parseSeed, portInUse } from '../option-values.js';
import { loadFaultRates, loadReplyScript } from '../sim-options.js';
import { waitForStop } from '../stop-signal.js';

interface SimOptions {
  port: string;
  host: string;
  script?: string;
  faults?: string;
  auth: boolean;
  seed?: string;
  zdr?: boolean;
}

export function registerSim(program: Command, io: CliIO, setExit: (code: number) => void): void {
  program
    .command('sim')
    .description('an offline Anthropic and OpenAI API that caches like the real ones')
    .option('--port <port>', 'port to listen on (0 = any free port)', '0')
    .addOption(
      new Option('--host <host>', 'address to bind (loopback only unless you mean it)').default('127.0.0.1'),
    )
    .option(
      '--script <file>',
      'scripted replies, turn by turn, per conversation (JSON; see docs/simulator.md)',
    )
    .option('--faults <spec>', 'random faults, e.g. 429@0.1,reset-mid-stream@0.01,slow=20@1')
    .option('--no-auth', 'accept requests without an API key')
    .option('--seed <n>', 'seed for fault draws and ids (an integer); without it, ids are unique to this run')
    .option(
      '--zdr',
      'simulate an OpenAI organization with Zero Data Retention: prompt_cache_retention defaults to in_memory (else 24h)',
    )
    .addHelpText(
      'after',
      '\nPer request, the header x-sim-fault: 429 | 529 | 500 | error-mid-stream | reset-mid-stream | stall=MS | slow=MS\ninjects a fault. POST /_sim/clock {"advance_ms": N} moves the clock; POST /_sim/reset empties the caches\nand zeroes the counters; GET /_sim/stats reports entries, requests and tokens read and written, per provider.',
    )
    .action(async (opts: SimOptions) => {
      const port = parsePort('--port', opts.port);
      const seed = opts.seed === undefined ? undefined : parseSeed('--seed', opts.seed);
      const script = opts.script ? await loadReplyScript(opts.script) : undefined;
      const faults = loadFaultRates(opts.faults);
      const sim = createSimulator({
        requireApiKey: opts.auth,
        faults,
        ...(seed !== undefined ? { seed } : {}),
        zdr: opts.zdr === true,
        ...(script ? { script } : {}),
        logger: lineLogger('cacheward sim', (l) => io.err(l)),
      });
      let url: string;
      try {
        url = await sim.listen({ port, host: opts.host });
      } catch (err) {
        if (portInUse(err))
          throw new InputError(
            `--port ${port}: already in use (another cacheward sim?); pass another port, or --port 0 for any free one`,
          );
        throw new InputError(`cannot listen on ${opts.host}:${port}: ${(err as Error).message}`);
      }
      io.out(`cacheward sim listening on ${url}`);
      io.out(`  ANTHROPIC_BASE_URL=${url}  OPENAI_BASE_URL=${url}/v1`);
      await waitForStop();
      await sim.close();
      setExit(0);
    });
}
