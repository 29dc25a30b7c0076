// Reading the simulator's options for `cacheward sim` and `cacheward run --sim`: the reply script file and
// the fault rates. Every problem is an InputError naming the file or flag; nothing here starts a server.

import { readFile } from 'node:fs/promises';
import { InputError } from '../core/errors.js';
import { parseFaultRates } from '../sim/faults.js';
import { parseReplyScript } from '../sim/reply-script.js';

export type ReplyScript = ReturnType<typeof parseReplyScript>;
export type FaultRates = ReturnType<typeof parseFaultRates>;

/** Reads and checks a `--script FILE`. */
export async function loadReplyScript(file: string): Promise<ReplyScript> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    throw new InputError(`${file}: cannot read: ${e.code === 'ENOENT' ? 'no such file' : e.message}`);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new InputError(`${file}: invalid JSON: ${(err as Error).message}`);
  }
  try {
    return parseReplyScript(value, file);
  } catch (err) {
    throw new InputError((err as Error).message);
  }
}

/** Reads `--faults SPEC`. */
export function loadFaultRates(spec: string | undefined): FaultRates {
  try {
    return spec ? parseFaultRates(spec) : [];
  } catch (err) {
    throw new InputError(`--faults: ${(err as Error).message}`);
  }
}
