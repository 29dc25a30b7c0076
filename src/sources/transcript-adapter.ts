// Which adapter reads a transcript file, and the one shape both give: lines in, requests out, and what to do
// when the file stops growing. Pure: it looks at the file's name and kind only, never opens the file.

import { basename } from 'node:path';
import { ClaudeCodeTranscript } from './claude-code-transcript.js';
import { CodexRollout } from './codex-rollout.js';
import type { LineWarning, SourceRequest } from './source-request.js';
import type { SourceKind } from './transcript-kind.js';

/** An agent's adapter, as the report's reader and the live follower drive it. */
export interface TranscriptAdapter {
  /** Requests ready to hand on, in the order their responses ended. */
  readonly ready: SourceRequest[];
  /** One line of the file (without its newline), numbered from 1. */
  line(text: string, n: number): void;
  /**
   * The file stopped growing: a response that says how it stopped is handed on without waiting for the next
   * line; with `all`, every response still open is (its file was given up on for now, not ended).
   */
  settle(all: boolean): void;
  /**
   * When the earliest call still waiting for its response started (ms), when the transcript says a call was
   * sent and its response is not handed on yet; undefined when none is known to wait.
   */
  waitingSince(): number | undefined;
  /** The end of the file: what is still open is handed on, and what never got a response is said once. */
  end(): void;
}

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
