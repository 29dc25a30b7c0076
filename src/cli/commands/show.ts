// `cacheward show ID`: the request a capture record holds, byte for byte (full mode), or the record itself.
// A thin shell over findRecord; it never prints a credential (captures hold none).

import type { Command } from 'commander';
import { InputError } from '../../core/errors.js';
import { EXIT_OK } from '../exit-codes.js';
import { findRecord, RECORD_ID, recordBody, recordSearchPaths } from '../find-record.js';
import type { CliIO } from '../io.js';

interface ShowOptions {
  dir?: string;
  client?: boolean;
  record?: boolean;
}

export function registerShow(program: Command, io: CliIO, setExit: (code: number) => void): void {
  program
    .command('show')
    .description('print the request body a capture record holds (captured with --capture full)')
    .argument('<id>', 'a capture record id (cw_…), as report --json and replay name them')
    .option('--dir <path>', 'capture folder or file to look in (default: the proxy’s default capture folder)')
    .option('--client', 'the bytes the client sent, when a fix changed what went upstream')
    .option('--record', 'print the capture record (times, usage, prefix blocks, fixes) as JSON instead')
    .addHelpText(
      'after',
      '\nThe body is printed exactly as it went upstream (pipe it to jq to indent it). Compare two records\nwith `cacheward diff ID1 ID2 --dir DIR`.',
    )
    .action(async (id: string, opts: ShowOptions) => {
      if (!RECORD_ID.test(id))
        throw new InputError(
          `${id}: not a capture record id; ids look like cw_mf3k2a1b9c0d1e2f3a (report --json lists them)`,
        );
      const found = await findRecord(id, recordSearchPaths(opts.dir));
      if (opts.record) io.out(JSON.stringify(found.record, null, 2));
      else io.out(recordBody(found, Boolean(opts.client)).toString('utf8'));
      setExit(EXIT_OK);
    });
}
