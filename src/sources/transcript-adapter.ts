// Which adapter reads a transcript file (both have the shape of source-request.ts's TranscriptAdapter).
// Pure: it looks at the file's name and kind only, never opens the file.

import { basename } from 'node:path';
import { ClaudeCodeTranscript } from './claude-code-transcript.js';
import { CodexRollout } from './codex-rollout.js';
import type { LineWarning, TranscriptAdapter } from './source-request.js';
import type { SourceKind } from './transcript-kind.js';

/** The adapter for one transcript file of the given kind. */
export function transcriptAdapter(
  file: string,
  kind: Exclude<SourceKind, 'capture'>,
  warn: LineWarning,
): TranscriptAdapter {
  if (kind === 'codex') {
    const session = rolloutSession(file);
    return new CodexRollout({ warn, ...(session ? { session } : {}) });
  }
  const agentId = subagentOf(file);
  return new ClaudeCodeTranscript({ warn, ...(agentId ? { agentId } : {}) });
}

/** A subagent's id from its file name (`agent-<id>.jsonl`), when the file is one. */
export function subagentOf(file: string): string | undefined {
  return /^agent-(.+)\.jsonl$/.exec(basename(file))?.[1];
}

/** A Codex session id from its rollout's name (`rollout-<time>-<uuid>.jsonl`). */
export function rolloutSession(file: string): string | undefined {
  return /-([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.jsonl$/i.exec(basename(file))?.[1];
}
