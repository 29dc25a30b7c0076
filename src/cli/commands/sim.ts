// `cacheward sim`: the offline provider simulator on 127.0.0.1. A thin shell over createSimulator:
// it reads the script file, prints the base URL first, and stops cleanly on SIGINT/SIGTERM.

import { readFile } from 'node:fs/promises';
import { type Command, Option } from 'commander';
import { parseFaultRates } from '../../sim/faults.js';
import { parseReplyScript } from '../../sim/reply-script.js';
import { createSimulator } from '../../sim/simulator.js';
import type { CliIO } from '../io.js';
import { InputError } from '../read-request-file.js';

interface SimOptions {
  port: string;
  host: string;
  script?: string;
  faults?: string;
  auth: boolean;
  seed: string;
}

export function registerSim(program: Command, io: CliIO, setExit: (code: number) => void): void {
  program
    .command('sim')
    .description('an offline Anthropic and OpenAI API that caches like the real ones')
    .option('--port <port>', 'port to listen on (0 = any free port)', '0')
    .addOption(
      new Option('--host <host>', 'address to bind (loopback only unless you mean it)').default('127.0.0.1'),
    )
    .option('--script <file>', 'scripted replies, turn by turn, per conversation (JSON; see README)')
    .option('--faults <spec>', 'random faults, e.g. 429@0.1,reset-mid-stream@0.01,slow=20@1')
    .option('--no-auth', 'accept requests without an API key')
    .option('--seed <n>', 'seed for fault draws and ids', '1')
    .addHelpText(
      'after',
      '\nPer request, the header x-sim-fault: 429 | 529 | 500 | error-mid-stream | reset-mid-stream | stall=MS | slow=MS\ninjects a fault. POST /_sim/clock {"advance_ms": N} moves the clock; POST /_sim/reset empties the caches\nand zeroes the counters; GET /_sim/stats reports entries, requests and tokens read and written, per provider.',
    )
    .action(async (opts: SimOptions) => {
      const port = Number(opts.port);
      if (!Number.isInteger(port) || port < 0 || port > 65535)
        throw new InputError(`--port ${opts.port}: not a port number`);
      let script: ReturnType<typeof parseReplyScript> | undefined;
      if (opts.script) {
        let text: string;
        try {
          text = await readFile(opts.script, 'utf8');
        } catch (err) {
          throw new InputError(`${opts.script}: cannot read: ${(err as Error).message}`);
        }
        let value: unknown;
        try {
          value = JSON.parse(text);
        } catch (err) {
          throw new InputError(`${opts.script}: invalid JSON: ${(err as Error).message}`);
        }
        script = parseReplyScript(value, opts.script);
      }
      let faults: ReturnType<typeof parseFaultRates> = [];
      try {
        faults = opts.faults ? parseFaultRates(opts.faults) : [];
      } catch (err) {
        throw new InputError(`--faults: ${(err as Error).message}`);
      }
      const sim = createSimulator({
        requireApiKey: opts.auth,
        faults,
        seed: Number(opts.seed) || 1,
        ...(script ? { script } : {}),
        onError: (err) => io.err(`cacheward sim: ${String(err)}`),
      });
      const url = await sim.listen(port, opts.host);
      io.out(`cacheward sim listening on ${url}`);
      io.out(`  ANTHROPIC_BASE_URL=${url}  OPENAI_BASE_URL=${url}/v1`);
      await new Promise<void>((resolve) => {
        const stop = () => resolve();
        process.once('SIGINT', stop);
        process.once('SIGTERM', stop);
      });
      await sim.close();
      setExit(0);
    });
}
