// Codex's session rollout (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`) read line by line into the
// Responses calls it records. Pure: text in, requests out; it never opens a file or keeps text past them.
//
// Codex resends its whole input every turn, and the rollout keeps every input and output item in order with
// one usage record per response: a call's input is every item before its response's first output item. Not
// recorded: the tools and the request parameters but the model and a reasoning effort the user set (they stand
// as one opaque block sized from usage), and the id Codex gives its base-instructions message.
//
// A turn that ends in an error (`task_complete` with an `error`) ends with a call that got no answer: it is
// handed on without usage, refused, with the error the rollout says. Not recorded at all: the attempts Codex
// retried before it gave up or got an answer, and the `generate: false` warm-up a Responses WebSocket sends
// first (docs/transcripts.md).

import { isObj, type Json } from '../core/json.js';
import type { UnrecordedPart } from '../record/capture-record.js';
import { SkippedLines } from './skipped-lines.js';
import type { LineWarning, SourceRequest, TranscriptAdapter } from './source-request.js';
import { unrecordedBlock } from './unrecorded-block.js';

const KNOWN_TYPES = new Set([
  'session_meta',
  'response_item',
  'event_msg',
  'turn_context',
  'token_usage_record',
  'world_state',
  'compacted',
]);

/** Codex versions whose rollouts this reader knows (0.x). */
const KNOWN_MAJORS = new Set([0]);

const UNRECORDED: UnrecordedPart[] = ['tools', 'params'];

/** Kinds of a turn's error (`codex_error_info`) that no model call had: the turn's last call is not the failure. */
const NOT_A_CALL = new Set(['sandbox_error', 'active_turn_not_steerable', 'thread_rollback_failed']);

/** Items the model produces (the response's output); everything else is input the client sends. */
function isOutput(item: Json): boolean {
  if (item.type === 'message') return item.role === 'assistant';
  if (item.type === 'reasoning') return true;
  return typeof item.type === 'string' && item.type.endsWith('_call');
}

export interface CodexOptions {
  /** The session id to use until the rollout names its own (from the file name). */
  session?: string;
  warn: LineWarning;
}

interface Response {
  start: number;
  firstByte: number;
  /** How many of `items` its request sent. */
  input: number;
  line: number;
}

const time = (v: unknown): number => (typeof v === 'string' ? Date.parse(v) : Number.NaN);

export class CodexRollout implements TranscriptAdapter {
  readonly ready: SourceRequest[] = [];
  private session: string | undefined;
  private base: string | undefined;
  private model: string | undefined;
  private effort: string | undefined;
  private version = 'unknown';
  /** The input so far, each item's JSON made once. */
  private items: string[] = [];
  private response: Response | undefined;
  private lastTime = Number.NaN;
  private usageRecords = false;

  private readonly skipped: SkippedLines;

  constructor(private readonly options: CodexOptions) {
    this.skipped = new SkippedLines(options.warn);
    this.session = options.session;
  }

  line(text: string, n: number): void {
    const v = this.skipped.record(text, n, 'a Codex rollout record');
    if (!v) return;
    if (!isObj(v.payload)) {
      this.skipped.skip('shape', n, 'skipped a line that is not a Codex rollout record');
      return;
    }
    if (!KNOWN_TYPES.has(v.type)) {
      this.skipped.skip(
        `type:${v.type}`,
        n,
        `skipped a record of a type this version does not know ("${v.type}")`,
      );
      return;
    }
    const p = v.payload;
    const at = time(v.timestamp);
    switch (v.type) {
      case 'session_meta':
        this.meta(p, n);
        break;
      case 'turn_context':
        if (typeof p.model === 'string') this.model = p.model;
        // Recorded when the user set it (the model's default is not written).
        this.effort = typeof p.effort === 'string' ? p.effort : undefined;
        break;
      case 'response_item':
        this.item(p, at, n);
        break;
      case 'token_usage_record':
        this.usageRecords = true;
        this.answered(isObj(p.usage) ? p.usage : undefined, p.response_id, at, n);
        break;
      case 'event_msg':
        // Rollouts without usage records say each response's usage in a token_count event.
        if (!this.usageRecords && p.type === 'token_count' && this.response) {
          const info = isObj(p.info) ? p.info : undefined;
          this.answered(isObj(info?.last_token_usage) ? info.last_token_usage : undefined, undefined, at, n);
        } else if (p.type === 'task_complete' && isObj(p.error)) this.failed(p.error, at, n);
        break;
      case 'compacted':
        if (Array.isArray(p.replacement_history)) {
          this.items = p.replacement_history.filter(isObj).map(wireItem);
          this.response = undefined;
        } else
          this.options.warn(
            n,
            'a compaction whose replacement history the rollout does not hold: the calls after it are read from the items after it',
          );
        break;
      default:
        break;
    }
    if (!Number.isNaN(at)) this.lastTime = at;
  }

  /** Nothing waits for a later line: each response is handed on at its usage record. */
  settle(_all: boolean): void {}

  /** The start of the response under way (its output began, its usage is not recorded yet). */
  waitingSince(): number | undefined {
    return this.response?.start;
  }

  end(): void {
    if (this.response)
      this.options.warn(this.response.line, 'a response with no usage in the rollout (cut off): not counted');
    this.response = undefined;
    this.skipped.end();
  }

  private meta(p: Json, n: number): void {
    const version = typeof p.cli_version === 'string' ? p.cli_version : undefined;
    const major = version ? Number(/^(\d+)\./.exec(version)?.[1]) : undefined;
    if (major !== undefined && !KNOWN_MAJORS.has(major)) {
      this.skipped.skip(
        'version',
        n,
        `skipped the session record of Codex ${version}, a version never seen (known: 0.x)`,
      );
      return;
    }
    if (version) this.version = version;
    const id = typeof p.id === 'string' ? p.id : typeof p.session_id === 'string' ? p.session_id : undefined;
    if (id) this.session = id;
    const base = isObj(p.base_instructions) ? p.base_instructions.text : undefined;
    if (typeof base === 'string') this.base = base;
  }

  private item(p: Json, at: number, n: number): void {
    if (isOutput(p) && !this.response)
      this.response = {
        start: Number.isNaN(this.lastTime) ? at : this.lastTime,
        firstByte: at,
        input: this.items.length,
        line: n,
      };
    this.items.push(wireItem(p));
  }

  /**
   * A turn that ended in an error: its last call (every item so far, or the response under way) got no
   * answer. The rollout keeps the error's text and Codex's kind of it (`codex_error_info`, `other` for a
   * 400), and a status only where that kind carries one (`{"<kind>": {"http_status_code": N}}`).
   */
  private failed(error: Json, at: number, n: number): void {
    const info = error.codex_error_info;
    if (typeof info === 'string' && NOT_A_CALL.has(info)) return;
    const status = statusOf(info);
    this.answered(undefined, undefined, at, n, { error: errorText(error), ...(status ? { status } : {}) });
  }

  /** A response's usage: the call that got it is every item before its first output. */
  private answered(
    usage: Json | undefined,
    responseId: unknown,
    at: number,
    n: number,
    failure?: { error: string; status?: number },
  ): void {
    const r = this.response ?? {
      start: Number.isNaN(this.lastTime) ? at : this.lastTime,
      firstByte: at,
      input: this.items.length,
      line: n,
    };
    this.response = undefined;
    if (!usage && !failure) return;
    const session = this.session ?? 'unknown';
    const input = [unrecordedBlock(UNRECORDED, session)];
    // The base instructions are Codex's first input item, a developer message (its id is not recorded).
    if (this.base !== undefined)
      input.push(
        JSON.stringify({
          type: 'message',
          role: 'developer',
          content: [{ type: 'input_text', text: this.base }],
        }),
      );
    for (let i = 0; i < r.input; i++) input.push(this.items[i] as string);
    const model = this.model ?? 'unknown';
    const reasoning = this.effort ? `,"reasoning":${JSON.stringify({ effort: this.effort })}` : '';
    const body = `{"model":${JSON.stringify(model)},"stream":true,"input":[${input.join(',')}]${reasoning},"store":false,"prompt_cache_key":${JSON.stringify(session)}}`;
    const id = typeof responseId === 'string' ? responseId : `${session}:${n}`;
    const req: SourceRequest = {
      id,
      line: r.line,
      provider: 'openai',
      route: '/v1/responses',
      session: { key: `pck:${session}`, source: 'prompt_cache_key' },
      headers: { 'user-agent': `codex_exec/${this.version}` },
      betas: [],
      model,
      times: { start: r.start, firstByte: r.firstByte, end: at },
      body: Buffer.from(body),
      unrecorded: { parts: UNRECORDED, scope: session },
      exact: false,
    };
    if (usage) req.usage = responsesUsage(usage);
    if (failure) {
      req.error = failure.error;
      if (failure.status !== undefined) req.status = failure.status;
    }
    if (typeof responseId === 'string') req.responseId = responseId;
    this.ready.push(req);
  }
}

/** The HTTP status a turn's `codex_error_info` carries (`{"<kind>": {"http_status_code": N}}`), if any. */
function statusOf(info: unknown): number | undefined {
  if (!isObj(info)) return undefined;
  for (const v of Object.values(info))
    if (isObj(v) && typeof v.http_status_code === 'number' && v.http_status_code >= 400)
      return v.http_status_code;
  return undefined;
}

/**
 * A turn's error in the capture's words where it holds the provider's error body (`type: message`), else
 * its text as Codex wrote it.
 */
function errorText(error: Json): string {
  const text = typeof error.message === 'string' ? error.message : 'the turn ended in an error';
  try {
    const body = JSON.parse(text) as unknown;
    const e = isObj(body) && isObj(body.error) ? body.error : undefined;
    if (e && typeof e.message === 'string')
      return typeof e.type === 'string' ? `${e.type}: ${e.message}` : e.message;
  } catch {
    // Not the provider's body: Codex's own words.
  }
  return text;
}

/** An item as Codex sends it: the rollout's, without the metadata it keeps for itself. */
function wireItem(p: Json): string {
  const { internal_chat_message_metadata_passthrough: _kept, ...item } = p;
  return JSON.stringify(item);
}

/** The rollout's usage in the Responses API's own shape (what the provider sent). */
function responsesUsage(u: Json): Record<string, unknown> {
  const num = (v: unknown) => (typeof v === 'number' ? v : 0);
  const details: Json = { cached_tokens: num(u.cached_input_tokens) };
  if ('cache_write_input_tokens' in u) details.cache_write_tokens = num(u.cache_write_input_tokens);
  return {
    input_tokens: num(u.input_tokens),
    input_tokens_details: details,
    output_tokens: num(u.output_tokens),
    output_tokens_details: { reasoning_tokens: num(u.reasoning_output_tokens) },
    total_tokens: num(u.total_tokens),
  };
}
