// A captured IO for running the CLI in-process in tests.
import { Readable } from 'node:stream';
import type { CliIO } from '../../src/cli/io.js';
import { runCli } from '../../src/cli/program.js';

export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

export async function cli(args: string[], stdin = ''): Promise<CliRun> {
  const out: string[] = [];
  const err: string[] = [];
  const io: CliIO = {
    out: (l) => out.push(l),
    err: (l) => err.push(l),
    color: false,
    stdin: Readable.from([Buffer.from(stdin)]),
  };
  const code = await runCli(args, io);
  return { code, stdout: out.join('\n'), stderr: err.join('\n') };
}
