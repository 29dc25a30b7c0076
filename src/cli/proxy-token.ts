// Where `cacheward proxy` takes its access token from: --token-file, the CACHEWARD_TOKEN environment
// variable, or --token (which other users can read in `ps`). It never prints the token.

import { readFileSync } from 'node:fs';
import { InputError } from '../core/errors.js';

export const TOKEN_ENV = 'CACHEWARD_TOKEN';

export interface TokenSources {
  token?: string | undefined;
  tokenFile?: string | undefined;
}

/** The token, and a warning to print when it came from the command line. */
export function resolveToken(
  o: TokenSources,
  env: NodeJS.ProcessEnv = process.env,
): { token?: string; warning?: string } {
  if (o.token !== undefined && o.tokenFile !== undefined)
    throw new InputError(
      '--token and --token-file: give one of them (the file is better: it stays out of ps)',
    );
  if (o.tokenFile !== undefined) {
    let text: string;
    try {
      text = readFileSync(o.tokenFile, 'utf8');
    } catch (err) {
      throw new InputError(`--token-file ${o.tokenFile}: ${(err as Error).message}`);
    }
    const token = text.replace(/\r?\n$/, '');
    if (!token || /[\r\n]/.test(token))
      throw new InputError(`--token-file ${o.tokenFile}: the file must hold the token on one line`);
    return { token };
  }
  if (o.token !== undefined) {
    if (!o.token) throw new InputError('--token: the token is empty');
    return {
      token: o.token,
      warning: `--token is visible to other users in ps; prefer ${TOKEN_ENV}=… or --token-file FILE`,
    };
  }
  const fromEnv = env[TOKEN_ENV];
  return fromEnv ? { token: fromEnv } : {};
}
