// What `replay` and `whatif --fix` say when nothing could be replayed: a gate that checked nothing must not pass.
// It only builds the message; the commands throw it (exit 2).

import { InputError } from '../core/errors.js';
import type { ReplayResult } from '../replay/replay-captures.js';

export function nothingReplayed(paths: readonly string[], result: ReplayResult): InputError {
  return new InputError(
    `${paths.join(', ')}: nothing to replay: ${result.skipped} capture record${result.skipped === 1 ? '' : 's'}, none a turn with the request bytes a replay needs (hashes-mode captures keep none, nor do transcripts with messages and usage only; count_tokens calls and refused requests are no turns); capture with --capture full (cacheward proxy --capture full, or cacheward run --capture full) and replay those`,
  );
}
