// What a source adapter hands on: one API request rebuilt from an agent's transcript, with its usage, times,
// session and model. Pure data; the adapters never write it anywhere and nothing after them reads its text.

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
   * Parts the transcript does not record: the body then begins with one {@link UNRECORDED_KIND} block for
   * them, sized from usage per `scope` (the calls that share that block: one agent's line in one session).
   */
  unrecorded?: { parts: UnrecordedPart[]; scope: string };
  /** The rebuilt body is the wire's byte for byte, but for what the transcript cannot know (docs/transcripts.md). */
  exact: boolean;
}

/** Where an adapter's warnings go: one line each, naming the file's line. */
export type LineWarning = (line: number, message: string) => void;
