// What a source adapter is and hands on: lines in, requests rebuilt from an agent's transcript out (usage,
// times, session, model). Pure data; the adapters never write it anywhere, nothing after them reads its text.

import type { UnrecordedPart } from '../record/capture-record.js';

/** One request as an adapter rebuilt it. Times are ms since the epoch on the agent's clock. */
export interface SourceRequest {
  /** Unique across sources: the agent's own id for the call (a request record's id, a response id). */
  id: string;
  /** The line of the transcript that names the request (its request record, or its response's first line). */
  line: number;
  provider: 'anthropic' | 'openai';
  route: '/v1/messages' | '/v1/responses';
  /** The session label the client sent on the wire, as the proxy would have read it. */
  session: { key: string; source: string };
  headers: Record<string, string>;
  betas: string[];
  model: string | undefined;
  times: { start: number; firstByte?: number; end?: number };
  /** The request body as rebuilt (the wire's where the transcript records it all). Never written anywhere. */
  body: Buffer;
  /** The response's usage in the provider's own shape; absent when the call got none. */
  usage?: Record<string, unknown>;
  responseId?: string;
  stopReason?: string;
  /** The status of a call the provider refused (the transcript's error line says it). */
  status?: number;
  /**
   * How a call with no status and no usage ended, where the transcript's error line says it: the client gave
   * up waiting (`client_aborted`), the connection dropped (`upstream_reset`), or it never reached the
   * provider (`upstream_error`). Absent: the transcript does not say (counted as no response recorded).
   */
  outcome?: 'client_aborted' | 'upstream_reset' | 'upstream_error';
  /**
   * The error a transcript records for a call that got no answer, in the capture's words (`type: message`)
   * where it gives them: the call is then refused (outcome `error`) even when the transcript does not say
   * its status (`status` is then left out, never guessed).
   */
  error?: string;
  /**
   * Parts the transcript does not record: the body then begins with one {@link UNRECORDED_KIND} block for
   * them, sized from usage per `scope` (the calls that share that block: one agent's line in one session).
   */
  unrecorded?: { parts: UnrecordedPart[]; scope: string };
  /** The rebuilt body is the wire's byte for byte, but for what the transcript cannot know (docs/transcripts.md). */
  exact: boolean;
}

/** Where an adapter's warnings go: one line each, naming the file's line. */
export type LineWarning = (line: number, message: string) => void;

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
