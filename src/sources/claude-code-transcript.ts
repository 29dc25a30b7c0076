// Claude Code's transcript (`~/.claude/projects/<project>/<session>.jsonl`, a subagent's own file) read line by
// line into the API calls it records. Pure: text in, requests out; it never opens a file or keeps text past them.
//
// Two ways, per call. Where the transcript has the call's request record (`api-request`, Claude Code 2.1.33x),
// the body is rebuilt exactly (claude-code-body.ts) and checked against its digest. Where it has only the
// response's lines (older versions), the call is rebuilt from the messages before it, and what the transcript
// does not record (tools, system, parameters, the reminders Claude Code adds) stands as one opaque block.

import { createHash, type Hash } from 'node:crypto';
import { isObj, type Json } from '../core/json.js';
import { LruMap } from '../core/lru-map.js';
import type { UnrecordedPart } from '../record/capture-record.js';
import {
  billingLine,
  type ClaudeCodeCall,
  claudeCodeBody,
  claudeCodeDigest,
  type DigestCheckpoint,
  type MarkerAt,
  MessageRef,
  RequestShape,
} from './claude-code-body.js';
import { SkippedLines } from './skipped-lines.js';
import type { LineWarning, SourceRequest, TranscriptAdapter } from './source-request.js';
import { stableJsonWithoutMarkers } from './stable-hash.js';
import { unrecordedBlock } from './unrecorded-block.js';

/** Every line type Claude Code writes (its own list, 2.1.332), and the ones this reader uses. */
export const CLAUDE_CODE_TYPES: ReadonlySet<string> = new Set([
  'user',
  'assistant',
  'system',
  'attachment',
  'progress',
  'queue-operation',
  'api-request',
  'api-request-resumed',
  'api-request-shape',
  'api-request-blob',
  'frame-link',
  'observer-ref',
  'continued-in',
  'resume-head-vouch',
  'file-history-snapshot',
  'file-history-delta',
  'attribution-snapshot',
  'custom-title',
  'ai-title',
  'tag',
  'relocated',
  'agent-name',
  'agent-color',
  'agent-setting',
  'mode',
  'permission-mode',
  'session-owner',
  'isolation-latch',
  'dev-mods',
  'atis-latch',
  'worktree-state',
  'bridge-session',
  'tools-used',
  'data-flow-records',
  'data-flow-incomplete',
  'derived-from',
  'summary',
  'pr-link',
  'history-suppression',
  'ended-by-model',
  'cost-state',
  'last-prompt',
  'content-replacement',
  'memory-mode',
  'artifact-comment-monitor',
  'artifact-autoreact-ledger',
  'fork-context-ref',
  'repl-mode',
  'hybrid-organization',
  'host-row',
]);

/** Claude Code versions whose transcripts this reader knows (1.x and 2.x); a line of another is skipped. */
const KNOWN_MAJORS = new Set([1, 2]);

/** What the messages-and-usage path cannot see of a Claude Code call. */
const MESSAGES_ONLY: UnrecordedPart[] = ['tools', 'system', 'params', 'injected'];

/** Request records kept as bases for later ones (a base is a recent call of the same agent). */
const KEPT_BASES = 512;

export interface ClaudeCodeOptions {
  /** The agent id of a subagent's own file (`subagents/agent-<id>.jsonl`); absent for a session's file. */
  agentId?: string;
  warn: LineWarning;
}

/** A request record read, waiting for its response. */
interface Call {
  id: string;
  line: number;
  start: number;
  model: string;
  betas: string[];
  /** The body and whether it matched its digest; undefined when a part it names is missing. */
  body: Buffer | undefined;
  missing?: string;
  digestOk: boolean;
  /** How it ended without a response, where an error line says it did. */
  ended?: Ended;
  response?: Answer;
  /** The call it extends (its retries extend it, or one another). */
  base?: string;
  /** Its `requestDigest`, as recorded. */
  digest?: string;
}

/** How a call ended without a response: its status, or how it was cut off (neither: not said). */
interface Ended {
  status?: number;
  outcome?: SourceRequest['outcome'];
  /** It was refused, where the transcript says so but not with what status. */
  error?: string;
}

/** A retry resends its attempt unchanged (the same `requestDigest`), naming it as its base. */
const RETRIED = 'an attempt retried unchanged (the transcript does not say how it failed)';

/** Not answered and not ended yet. */
const waiting = (call: Call): boolean => !call.response && !call.ended;

/**
 * How an attempt with no HTTP status ended, in the transcript's own words: the connection dropped
 * (`ECONNRESET`, `EPIPE`), another connection error (never reached the provider), or the client's timeout.
 */
function endedAs(error: Json): Ended {
  const connection = isObj(error.connection) ? error.connection : undefined;
  const code = typeof connection?.code === 'string' ? connection.code : undefined;
  if (code === 'ECONNRESET' || code === 'EPIPE') return { outcome: 'upstream_reset' };
  if (code !== undefined) return { outcome: 'upstream_error' };
  if (typeof error.message === 'string' && /timed out/i.test(error.message))
    return { outcome: 'client_aborted' };
  return {};
}

/** A response's lines, gathered (one assistant line per content block, the same usage on each). */
interface Answer {
  key: string;
  line: number;
  first: number;
  last: number;
  usage?: Json;
  model?: string;
  messageId?: string;
  stopReason?: string;
  /** The message the response answers (messages-only path): the line its first line follows. */
  parent?: string;
  requestId?: string;
}

/** One user or assistant line on the path from a response back to the start of its conversation. */
interface ChainNode {
  uuid: string;
  parent: string | undefined;
  role?: 'user' | 'assistant';
  content?: unknown;
  messageId?: string;
  time: number;
}

/** The consecutive lines that make one API message, as Claude Code groups them (and hashes them). */
interface Run {
  role: 'user' | 'assistant';
  messageId: string | undefined;
  blocks: unknown[];
  hash: Hash;
  /** A single line's string content, kept as sent. */
  text?: string;
  lines: number;
}

const time = (v: unknown): number => (typeof v === 'string' ? Date.parse(v) : Number.NaN);

function majorOf(version: unknown): number | undefined {
  if (typeof version !== 'string') return undefined;
  const m = /^(\d+)\./.exec(version);
  return m ? Number(m[1]) : undefined;
}

export class ClaudeCodeTranscript implements TranscriptAdapter {
  /** Requests ready to hand on, in the order their responses ended. */
  readonly ready: SourceRequest[] = [];
  private readonly shapes = new Map<string, RequestShape>();
  private readonly known = new Map<string, MessageRef>();
  private readonly sent = new LruMap<MessageRef[]>(KEPT_BASES);
  /** Where each recent call's digest stood after its unmarked messages (its successor goes on from there). */
  private readonly digests = new LruMap<DigestCheckpoint>(KEPT_BASES);
  private readonly calls = new Map<string, Call>();
  /** Responses already handed on: a line of one that comes after another line is not a new response. */
  private readonly done = new LruMap<true>(KEPT_BASES);
  /** Responses whose lines may still be coming (usually one). */
  private open: Answer[] = [];
  private readonly chain = new Map<string, ChainNode>();
  /** The JSON of the messages the messages-and-usage path sent, by the lines they are made of. */
  private readonly wire = new LruMap<Buffer>(8_192);
  private run: Run | undefined;
  private session: string | undefined;
  private version = 'unknown';
  private entrypoint = 'cli';
  private sidechain = false;
  /** The TTL of the markers on the messages-only path: what the usage last showed written. */
  private ttl: '5m' | '1h' = '5m';
  private unanswered = 0;
  private firstUnanswered = 0;
  /** Calls that ended with an error: a retry names its failed attempt as its base. */
  private readonly failed = new LruMap<true>(KEPT_BASES);
  /** The latest start of a call of this file that got its response or its error. */
  private lastEnded = Number.NEGATIVE_INFINITY;
  private sawRequests = false;
  private saidUnrecordedError = false;
  /**
   * A failed attempt's error line, waiting for the retry that names the attempt as its base (the line names no
   * call; Claude Code writes one for its compaction call too, which has no request record).
   */
  private pendingFailure: { ended: Ended; at: number } | undefined;

  private readonly skipped: SkippedLines;

  constructor(private readonly options: ClaudeCodeOptions) {
    this.skipped = new SkippedLines(options.warn);
  }

  /** One line of the file (without its newline). */
  line(text: string, n: number): void {
    const v = this.skipped.record(text, n, 'a Claude Code transcript record');
    if (!v) return;
    const type = v.type;
    if (!CLAUDE_CODE_TYPES.has(type)) {
      this.skipped.skip(
        `type:${type}`,
        n,
        `skipped a record of a type this version does not know ("${type}")`,
      );
      return;
    }
    const major = majorOf(v.version);
    if (major !== undefined && !KNOWN_MAJORS.has(major)) {
      this.skipped.skip(
        `version:${v.version}`,
        n,
        `skipped a record of Claude Code ${String(v.version)}, a version never seen (known: 1.x, 2.x)`,
      );
      return;
    }
    if (typeof v.sessionId === 'string') this.session ??= v.sessionId;
    if (typeof v.version === 'string') this.version = v.version;
    if (typeof v.entrypoint === 'string') this.entrypoint = v.entrypoint;
    if (v.isSidechain === true) this.sidechain = true;
    const ref = type === 'assistant' ? this.answerKey(v) : undefined;
    // A response's lines end at the first line that is not one of them.
    if (this.open.length) this.flush(ref);
    switch (type) {
      case 'api-request-shape':
        this.shape(v, n);
        return;
      case 'api-request-blob':
        this.blob(v, n);
        return;
      case 'api-request':
        this.request(v, n);
        return;
      case 'assistant':
      case 'user':
        this.message(v, n, ref);
        return;
      case 'system':
        this.node(v);
        if (v.subtype === 'api_error') this.attemptFailed(v);
        if (v.subtype === 'compact_boundary') {
          this.run = undefined;
          const meta = isObj(v.compactMetadata) ? v.compactMetadata : {};
          const trigger = typeof meta.trigger === 'string' ? ` (${meta.trigger})` : '';
          this.options.warn(
            n,
            `a compaction${trigger}: Claude Code does not record the API call that wrote its summary, so that call is not counted`,
          );
        }
        return;
      case 'attachment':
      case 'progress':
        this.node(v);
        return;
      default:
        return;
    }
  }

  /**
   * The file stopped growing: a response whose last line says how it stopped is handed on without waiting for
   * the next line; with `all`, every open response is. A line of it that comes later is not a new response.
   */
  settle(all: boolean): void {
    const keep: Answer[] = [];
    for (const a of this.open) {
      if (all || a.stopReason !== undefined) this.answered(a);
      else keep.push(a);
    }
    this.open = keep;
  }

  /** The earliest start of a request record not answered yet, or of a response still being gathered. */
  waitingSince(): number | undefined {
    let at = Number.POSITIVE_INFINITY;
    // A call that a later call of this file outlived (answered or ended first) waits for nothing more.
    for (const call of this.calls.values())
      if (waiting(call) && call.start >= this.lastEnded && call.start < at) at = call.start;
    for (const a of this.open) {
      const start = (a.parent ? this.chain.get(a.parent)?.time : undefined) ?? a.first;
      if (start < at) at = start;
    }
    return at === Number.POSITIVE_INFINITY ? undefined : at;
  }

  /** The end of the file: what is still open is handed on, and what never got a response is said once. */
  end(): void {
    this.flush(undefined);
    let passed = 0;
    let firstPassed = 0;
    for (const call of this.calls.values()) {
      if (!waiting(call)) continue;
      // A later call of this file got its answer: this one ended with none (a refusal the client wrote no
      // line for, as a 400 before a compaction), so it was sent, and is counted with no response.
      if (call.start < this.lastEnded) {
        call.ended = {};
        if (this.emitEnded(call)) {
          passed++;
          firstPassed ||= call.line;
        }
        continue;
      }
      this.unanswered++;
      this.firstUnanswered ||= call.line;
    }
    this.calls.clear();
    if (passed)
      this.options.warn(
        firstPassed,
        `${passed} API call${passed === 1 ? '' : 's'} got no response in the transcript though later calls did (refused or cut off: the transcript does not say how): counted with no response`,
      );
    if (this.unanswered)
      this.options.warn(
        this.firstUnanswered,
        `${this.unanswered} API call${this.unanswered === 1 ? ' has' : 's have'} no response in the transcript (cut off or still running): not counted`,
      );
    this.skipped.end();
  }

  private shape(v: Json, n: number): void {
    const shape = v.shape;
    if (typeof v.shapeHash !== 'string' || !isObj(shape) || !Array.isArray(shape.system)) {
      this.skipped.skip('bad-shape', n, 'skipped a request shape without its hash, system or tools');
      return;
    }
    const tools = Array.isArray(shape.tools) ? shape.tools : [];
    this.shapes.set(v.shapeHash, new RequestShape(shape.system, tools));
  }

  private blob(v: Json, n: number): void {
    if (typeof v.hash !== 'string' || !isObj(v.message)) {
      this.skipped.skip('bad-blob', n, 'skipped a message record without its hash or message');
      return;
    }
    this.known.set(v.hash, new MessageRef(v.message));
  }

  /** A request record: its messages from its base and tail, its body rebuilt and checked. */
  private request(v: Json, n: number): void {
    if (typeof v.id !== 'string' || !isObj(v.params) || typeof v.params.model !== 'string') {
      this.skipped.skip('bad-request', n, 'skipped a request record without its id or model');
      return;
    }
    const { model, betas, ...params } = v.params;
    const call: Call = {
      id: v.id,
      line: n,
      start: time(v.timestamp),
      model: model as string,
      betas: Array.isArray(betas) ? betas.filter((b): b is string => typeof b === 'string') : [],
      body: undefined,
      digestOk: false,
    };
    if (typeof v.base === 'string') call.base = v.base;
    if (typeof v.requestDigest === 'string') call.digest = v.requestDigest;
    this.calls.set(call.id, call);
    this.sawRequests = true;
    // A retry: the attempt it names as its base is the one the last error line ended, or, where no line
    // says so (a subagent's file has none), the one it resends unchanged, refused with a status not said.
    const failure = this.pendingFailure;
    this.pendingFailure = undefined;
    const attempt = call.base !== undefined ? this.calls.get(call.base) : undefined;
    if (attempt && waiting(attempt)) {
      if (failure && attempt.start <= failure.at) attempt.ended = failure.ended;
      else if (call.digest !== undefined && call.digest === attempt.digest)
        attempt.ended = { error: RETRIED };
      if (attempt.ended) this.emitEnded(attempt);
    }
    const missing = (what: string) => {
      call.missing = what;
    };
    const shape = typeof v.shapeHash === 'string' ? this.shapes.get(v.shapeHash) : undefined;
    let messages: MessageRef[] = [];
    if (typeof v.base === 'string') {
      const base = this.sent.get(v.base);
      if (!base) missing(`its base request ${v.base}`);
      else messages = base.slice(0, typeof v.keep === 'number' ? v.keep : base.length);
    }
    for (const h of Array.isArray(v.tail) ? v.tail : []) {
      const m = typeof h === 'string' ? this.known.get(h) : undefined;
      if (!m) {
        missing(`message ${String(h).slice(0, 12)}…`);
        break;
      }
      messages.push(m);
    }
    if (!call.missing) this.sent.set(call.id, messages);
    if (!shape) missing('its system and tools (api-request-shape)');
    if (call.missing || !shape) return;
    const markers: MarkerAt[] = (Array.isArray(v.cacheControl) ? v.cacheControl : []).flatMap((c) =>
      isObj(c) && Array.isArray(c.path) ? [{ path: c.path as Array<string | number>, value: c.value }] : [],
    );
    const built: ClaudeCodeCall = {
      model: call.model,
      params,
      betas: call.betas,
      shape,
      messages,
      markers,
      billing: billingLine(this.version, this.entrypoint, this.isSubagent()),
    };
    call.body = claudeCodeBody(built);
    const base = typeof v.base === 'string' ? this.digests.get(v.base) : undefined;
    const { digest, checkpoint } = claudeCodeDigest(built, base);
    this.digests.set(call.id, checkpoint);
    call.digestOk = typeof v.requestDigest !== 'string' || digest === v.requestDigest;
    if (!call.digestOk)
      this.options.warn(
        n,
        `request ${call.id}: the body rebuilt from the transcript does not match its requestDigest; it is used as rebuilt`,
      );
  }

  private isSubagent(): boolean {
    return this.options.agentId !== undefined || this.sidechain;
  }

  /** Which response an assistant line belongs to: its request record, else its message. */
  private answerKey(v: Json): string | undefined {
    if (typeof v.requestRef === 'string') return `ref:${v.requestRef}`;
    const m = isObj(v.message) ? v.message : undefined;
    if (typeof m?.id === 'string') return `msg:${m.id}`;
    return typeof v.requestId === 'string' ? `req:${v.requestId}` : undefined;
  }

  private message(v: Json, n: number, key: string | undefined): void {
    this.node(v);
    const m = isObj(v.message) ? v.message : undefined;
    this.note(m);
    if (v.type !== 'assistant' || !m) return;
    if (v.isApiErrorMessage === true) {
      this.refused(typeof v.apiErrorStatus === 'number' ? v.apiErrorStatus : undefined, time(v.timestamp), n);
      return;
    }
    if (m.model === '<synthetic>' || key === undefined || this.done.get(key)) return;
    // A response copied from the session this one was forked or resumed from: a call of that session.
    if (typeof v.requestSessionId === 'string' && v.requestSessionId !== this.session) return;
    const at = time(v.timestamp);
    const usage = isObj(m.usage) ? m.usage : undefined;
    let a = this.open.find((x) => x.key === key);
    if (!a) {
      a = { key, line: n, first: at, last: at };
      if (typeof v.parentUuid === 'string') a.parent = v.parentUuid;
      if (typeof v.requestId === 'string') a.requestId = v.requestId;
      this.open.push(a);
    }
    a.last = at;
    if (usage) a.usage = usage;
    if (typeof m.model === 'string') a.model = m.model;
    if (typeof m.id === 'string') a.messageId = m.id;
    if (typeof m.stop_reason === 'string') a.stopReason = m.stop_reason;
  }

  /**
   * An attempt failed and will be retried (a `system` `api_error` line): its status or how the connection
   * ended, for the attempt the retry's request record names as its base (the next request record).
   */
  private attemptFailed(v: Json): void {
    const error = isObj(v.error) ? v.error : {};
    const ended = typeof error.status === 'number' ? { status: error.status } : endedAs(error);
    this.pendingFailure = { ended, at: time(v.timestamp) };
  }

  /**
   * The client gave up with an API error (its status, when the line says it): the last attempt of a retried
   * call (a waiting call whose base failed) if there is one, else the latest call still waiting, and the
   * waiting calls it extends; a call of another line, in flight beside them, is not theirs.
   */
  private refused(status: number | undefined, at: number, n: number): void {
    let latest: Call | undefined;
    let retry: Call | undefined;
    for (const call of this.calls.values()) {
      if (!waiting(call) || call.start > at) continue;
      if (!latest || call.start >= latest.start) latest = call;
      if (call.base !== undefined && this.failed.get(call.base) && (!retry || call.start >= retry.start))
        retry = call;
    }
    if (!(retry ?? latest) && !this.sawRequests && !this.saidUnrecordedError) {
      this.saidUnrecordedError = true;
      this.options.warn(
        n,
        `an API error${status === undefined ? '' : ` (${status})`}: this Claude Code version writes no request records, so the calls that failed are not counted`,
      );
    }
    // The earlier attempts it extends that no error line ended share its status: Claude Code retries a 400
    // itself and writes one line for all of them (a subagent's file has no `api_error` lines at all).
    const ended: Ended = status === undefined ? {} : { status };
    for (let call = retry ?? latest; call && waiting(call); ) {
      call.ended = ended;
      this.emitEnded(call);
      call = call.base === undefined ? undefined : this.calls.get(call.base);
    }
  }

  /** Hands on a call that ended without a response; false (and said) when its body could not be rebuilt. */
  private emitEnded(call: Call): boolean {
    if (call.body) {
      this.failed.set(call.id, true);
      this.emitCall(call);
      return true;
    }
    this.calls.delete(call.id);
    this.options.warn(
      call.line,
      `request ${call.id}: ${call.missing ?? 'a part'} is not in the transcript; it ended with no response and is not counted`,
    );
    return false;
  }

  /** Hands on the responses that ended (all but the one `current` continues). */
  private flush(current: string | undefined): void {
    const keep: Answer[] = [];
    for (const a of this.open) {
      if (a.key === current) keep.push(a);
      else this.answered(a);
    }
    this.open = keep;
  }

  private answered(a: Answer): void {
    this.done.set(a.key, true);
    if (a.key.startsWith('ref:')) {
      const id = a.key.slice(4);
      // A response to a call already counted as failed (an error line named it): the one call, counted once.
      if (this.failed.get(id) && !this.calls.has(id)) {
        this.options.warn(
          a.line,
          `request ${id}: a response after the error line that ended it; counted once, as the error`,
        );
        return;
      }
      const call = this.calls.get(id);
      if (call?.body) {
        call.response = a;
        this.emitCall(call);
        return;
      }
      if (call) {
        this.calls.delete(call.id);
        this.options.warn(
          call.line,
          `request ${call.id}: ${call.missing ?? 'a part'} is not in the transcript; the call is read from its messages and usage instead`,
        );
      }
    }
    this.fromMessages(a);
  }

  private emitCall(call: Call): void {
    this.calls.delete(call.id);
    if (call.start > this.lastEnded) this.lastEnded = call.start;
    const a = call.response;
    const r: SourceRequest = {
      id: call.id,
      line: call.line,
      provider: 'anthropic',
      route: '/v1/messages',
      session: this.label(),
      headers: this.headers(call.betas),
      betas: call.betas,
      model: call.model,
      times: { start: call.start },
      body: call.body as Buffer,
      exact: call.digestOk,
    };
    if (a) {
      r.times.firstByte = a.first;
      r.times.end = a.last;
      if (a.usage) r.usage = a.usage;
      if (a.messageId) r.responseId = a.messageId;
      if (a.stopReason) r.stopReason = a.stopReason;
    }
    if (call.ended?.status !== undefined) r.status = call.ended.status;
    if (call.ended?.outcome) r.outcome = call.ended.outcome;
    if (call.ended?.error) r.error = call.ended.error;
    this.ready.push(r);
  }

  private label(): SourceRequest['session'] {
    return { key: this.session ?? 'unknown', source: 'claude-code' };
  }

  private headers(betas: readonly string[]): Record<string, string> {
    const h: Record<string, string> = {};
    if (betas.length) h['anthropic-beta'] = betas.join(',');
    if (this.session) h['x-claude-code-session-id'] = this.session;
    h['user-agent'] = `claude-cli/${this.version} (external, ${this.entrypoint})`;
    return h;
  }

  /** The messages-and-usage path: the call rebuilt from the lines before its response. */
  private fromMessages(a: Answer): void {
    if (!a.usage) return;
    const messages = this.messagesBefore(a.parent);
    if (!messages.length) {
      this.options.warn(a.line, 'a response whose request messages are not in the transcript: not counted');
      return;
    }
    const written = isObj(a.usage.cache_creation) ? a.usage.cache_creation : {};
    if (Number(written.ephemeral_1h_input_tokens) > 0) this.ttl = '1h';
    else if (Number(written.ephemeral_5m_input_tokens) > 0) this.ttl = '5m';
    const marker = this.ttl === '1h' ? { type: 'ephemeral', ttl: '1h' } : { type: 'ephemeral' };
    const scope = `${this.session ?? 'unknown'}/${this.options.agentId ?? (this.sidechain ? 'sidechain' : 'main')}`;
    const last = messages.length - 1;
    const parts: Buffer[] = [Buffer.from(`{"model":${JSON.stringify(a.model ?? 'unknown')},"messages":[`)];
    messages.forEach(({ value: m, key }, i) => {
      if (i > 0) parts.push(COMMA);
      if (i !== last) {
        let bytes = this.wire.get(key);
        if (!bytes) {
          bytes = Buffer.from(JSON.stringify(m));
          this.wire.set(key, bytes);
        }
        parts.push(bytes);
        return;
      }
      const content = typeof m.content === 'string' ? [{ type: 'text', text: m.content }] : m.content;
      const blocks = Array.isArray(content) ? content.slice() : [];
      // The marker on the last block that can carry one, as Claude Code places it.
      for (let j = blocks.length - 1; j >= 0; j--) {
        const b = blocks[j];
        if (isObj(b) && b.type !== 'thinking' && b.type !== 'redacted_thinking') {
          blocks[j] = { ...b, cache_control: marker };
          break;
        }
      }
      parts.push(Buffer.from(JSON.stringify({ ...m, content: blocks })));
    });
    const model = a.model ?? 'unknown';
    parts.push(Buffer.from(`],"system":[${unrecordedBlock(MESSAGES_ONLY, scope, marker)}],"stream":true}`));
    const parent = a.parent ? this.chain.get(a.parent) : undefined;
    const r: SourceRequest = {
      // The request record's id when the response names one (a copy of the call elsewhere is the same call).
      id:
        (a.key.startsWith('ref:') ? a.key.slice(4) : undefined) ??
        a.requestId ??
        a.messageId ??
        `${scope}:${a.line}`,
      line: a.line,
      provider: 'anthropic',
      route: '/v1/messages',
      session: this.label(),
      headers: this.headers([]),
      betas: [],
      model,
      times: { start: parent?.time ?? a.first, firstByte: a.first, end: a.last },
      body: Buffer.concat(parts),
      usage: a.usage,
      unrecorded: { parts: MESSAGES_ONLY, scope },
      exact: false,
    };
    if (a.messageId) r.responseId = a.messageId;
    if (a.stopReason) r.stopReason = a.stopReason;
    this.ready.push(r);
  }

  /** Remembers a line of the conversation tree (by uuid), for the messages-and-usage path. */
  private node(v: Json): void {
    if (typeof v.uuid !== 'string') return;
    const node: ChainNode = {
      uuid: v.uuid,
      parent: typeof v.parentUuid === 'string' ? v.parentUuid : undefined,
      time: time(v.timestamp),
    };
    const m = isObj(v.message) ? v.message : undefined;
    if ((v.type === 'user' || v.type === 'assistant') && m && m.content != null) {
      node.role = v.type;
      node.content = m.content;
      if (typeof m.id === 'string') node.messageId = m.id;
    }
    this.chain.set(v.uuid, node);
  }

  /**
   * The API messages of the conversation up to line `uuid`, grouped as Claude Code groups them, each with a
   * key naming the lines it is made of (its JSON is made once).
   */
  private messagesBefore(uuid: string | undefined): Array<{ value: Json; key: string }> {
    const nodes: ChainNode[] = [];
    const seen = new Set<string>();
    for (let at = uuid; at !== undefined && !seen.has(at); ) {
      seen.add(at);
      const node = this.chain.get(at);
      if (!node) break;
      if (node.role) nodes.push(node);
      at = node.parent;
    }
    nodes.reverse();
    const out: Array<{ value: Json; key: string }> = [];
    let prev: ChainNode | undefined;
    for (const node of nodes) {
      const blocks = blocksOf(node.content);
      const last = out[out.length - 1];
      if (last && prev && sameRun(prev, node)) {
        const content =
          typeof last.value.content === 'string'
            ? blocksOf(last.value.content)
            : (last.value.content as unknown[]);
        last.value.content = [...content, ...blocks];
        last.key += `+${node.uuid}`;
      } else out.push({ value: { role: node.role, content: node.content }, key: node.uuid });
      prev = node;
    }
    return out;
  }

  /** Keeps the hashes of the messages a user or assistant line makes (Claude Code's runs), for request tails. */
  private note(m: Json | undefined): void {
    const role = m?.role;
    if (!m || (role !== 'user' && role !== 'assistant') || m.content == null) {
      this.run = undefined;
      return;
    }
    const messageId = typeof m.id === 'string' ? m.id : undefined;
    const blocks = blocksOf(m.content);
    let run = this.run;
    if (!run || run.role !== role || (role === 'assistant' && (!messageId || run.messageId !== messageId))) {
      run = { role, messageId, blocks: [], hash: createHash('sha256').update('{"content":['), lines: 0 };
      this.run = run;
    }
    for (const b of blocks) {
      if (run.blocks.length) run.hash.update(',');
      run.hash.update(stableJsonWithoutMarkers(b));
      run.blocks.push(b);
    }
    run.lines++;
    const hash = run.hash
      .copy()
      .update(`],"role":${JSON.stringify(role)}}`)
      .digest('hex');
    if (this.known.has(hash)) return;
    // A single line's string content is sent as a string (the hash is over its text block either way).
    const content = run.lines === 1 && typeof m.content === 'string' ? m.content : run.blocks.slice();
    this.known.set(hash, new MessageRef({ role, content }));
  }
}

const COMMA = Buffer.from(',');

/** A message content as blocks (a string is one text block). */
function blocksOf(content: unknown): unknown[] {
  if (typeof content === 'string') return [{ type: 'text', text: content }];
  return Array.isArray(content) ? content : content == null ? [] : [content];
}

function sameRun(a: ChainNode, b: ChainNode): boolean {
  if (a.role !== b.role) return false;
  return a.role === 'user' || (a.messageId !== undefined && a.messageId === b.messageId);
}
