// One generated session of the ground-truth corpus: a conversation that grows step by step and the requests
// it sends, each with the cause the analyzer must name. Pure and seeded: the same seed, the same bytes.

import type { BustCause } from '../../../src/analyze/cause-table.js';
import {
  type Conversation,
  type Format,
  type Item,
  type Json,
  makeTool,
  render,
  type Style,
  type ToolDef,
  Words,
} from './conversation.js';

/** How a provider caches: Anthropic, OpenAI automatic (128 or 2,048 rounding), GPT-5.6+ breakpoints. */
export type Scheme = 'anthropic' | 'gpt-5.4' | 'gpt-5.5' | 'gpt-5.6-implicit' | 'gpt-5.6-explicit';

/** Where the session label comes from (none: the request carries no hint at all). */
export type LabelMode = 'header' | 'claude-code' | 'metadata' | 'prompt_cache_key' | 'none';

/** Which line a request is on: main-line requests must never be labelled a fork. */
export type Line = 'main' | 'fork' | 'sibling';

/**
 * What a request is: a turn, a count_tokens call, or a request the upstream refuses (a 400, or a 429 the
 * client then retries). Only turns are scored; the others must leave the turns around them alone.
 */
export type RequestKind = 'turn' | 'count_tokens' | 'refused' | 'rate_limited';

/** One request the corpus sends, with its ground truth. */
export interface PlannedRequest {
  kind: RequestKind;
  session: string;
  event: string;
  scheme: Scheme;
  format: Format;
  body: Json;
  headers: Record<string, string>;
  /** How long the clock moves before it is sent. */
  idleMs: number;
  /** Sent while the previous request is still waiting for its response (which stalls `stallMs`). */
  parallelWithPrevious: boolean;
  stallMs: number;
  stream: boolean;
  /** The cause the analyzer must name, or null: nothing cached was lost. */
  expect: BustCause | null;
  /** This request carries the session's event. */
  injected: boolean;
  line: Line;
  /**
   * Responses: sent chained on the session's previous response (`previous_response_id`), with only the
   * input items from `after` on (the earlier ones and the reply are the provider's stored context).
   */
  chain?: { after: number };
}

export interface SessionOptions {
  name: string;
  event: string;
  scheme: Scheme;
  format: Format;
  seed: number;
  label: LabelMode;
  model: string;
  /** Sentences of system prompt (about 20 tokens each). */
  systemSentences?: number;
  tools?: readonly string[];
  style?: Style;
}

export const AGENT_TOOLS = ['Bash', 'Glob', 'Grep', 'Read', 'Edit', 'Write'];
/** Claude Code's built-in tools (a sorted subset) and Codex's, the same for every session of the client. */
const CLAUDE_CODE_TOOLS = [
  'Agent',
  'Bash',
  'Edit',
  'Glob',
  'Grep',
  'NotebookEdit',
  'Read',
  'Skill',
  'TaskCreate',
  'WebFetch',
  'Write',
];
const CODEX_TOOLS = [
  'exec_command',
  'write_stdin',
  'request_user_input',
  'apply_patch',
  'view_image',
  'update_plan',
];
const CLIENT = new Words(20261201);
const CLAUDE_CODE_PROMPT = `You are an interactive agent that helps users with software engineering tasks. ${CLIENT.paragraph(70)}`;
const CLAUDE_CODE_TOOL_DEFS = CLAUDE_CODE_TOOLS.map((n) => makeTool(n, CLIENT));
const CODEX_BASE = `You are Codex, a coding agent based on GPT-5. ${CLIENT.paragraph(80)}`;
const CODEX_TOOL_DEFS = CODEX_TOOLS.map((n) => makeTool(n, CLIENT));
const AGENTS_LIST = `Available agent types for the Agent tool: claude, Explore, general-purpose, Plan. ${CLIENT.paragraph(8)}`;
const SKILLS = `<skills_instructions>${CLIENT.paragraph(10)}</skills_instructions>`;

/** A session under construction. `send` renders the conversation as it stands now. */
export class Session {
  readonly w: Words;
  readonly conv: Conversation;
  readonly requests: PlannedRequest[] = [];
  readonly headers: Record<string, string> = {};
  private calls = 0;
  readonly stream: boolean;
  /** The replies come with thinking (Anthropic: a thinking block before the text). */
  thinking = false;

  constructor(readonly o: SessionOptions) {
    this.w = new Words(o.seed);
    const style = o.style ?? 'plain';
    // Claude Code and Codex always stream; SDK users either way.
    this.stream = this.w.int(2) === 1 || style !== 'plain';
    this.conv = {
      model: o.model,
      tools: (o.tools ?? AGENT_TOOLS).map((n) => makeTool(n, this.w)),
      system: `You are a coding agent (${o.name}). ${this.w.paragraph(o.systemSentences ?? 60)}`,
      // A first message of realistic size (agents put instructions and context in it).
      items: [{ kind: 'user', parts: [{ text: `Task: ${this.w.paragraph(6)}` }] }],
      fields: {},
      ttl: { system: '5m', messages: '5m' },
      explicit: o.scheme === 'gpt-5.6-explicit',
      style,
      // Some SDK users let Anthropic place the moving breakpoint (a top-level cache_control).
      automatic: style === 'plain' && this.w.int(3) === 0,
    };
    const key = `${o.name}-${o.seed}`;
    if (style === 'plain') applyLabel(this, o.label, key);
    else clientStyle(this, style, key);
  }

  /**
   * The model's reply and the next input: a tool call and its result, or a text reply and a user message
   * (with `lines` of pasted code when given). `kinds` forces the kinds of the next steps, in order.
   */
  step(kind: 'tool' | 'chat' = this.nextKind(), lines = 12): void {
    if (kind === 'tool') {
      const id = `call_${this.o.seed}_${++this.calls}`;
      const name = this.conv.tools[this.w.int(this.conv.tools.length)]?.name ?? 'Read';
      const thought = this.thinking ? { thinking: this.w.sentence() } : {};
      this.conv.items.push(
        {
          kind: 'call',
          id,
          name,
          input: { path: `src/m${this.calls}.ts` },
          text: this.w.sentence(),
          ...thought,
        },
        { kind: 'result', id, output: this.w.code(lines) },
      );
    } else {
      const paste = lines > 12 ? `\n${this.w.code(lines)}` : '';
      const thought = this.thinking ? { thinking: this.w.sentence() } : {};
      this.conv.items.push(
        { kind: 'assistant', text: this.w.paragraph(2), ...thought },
        { kind: 'user', parts: [{ text: `${this.w.paragraph(2)}${paste}` }] },
      );
    }
  }

  /** Kinds the next steps must take (an event that needs a shape); then they are drawn at random. */
  readonly kinds: Array<'tool' | 'chat'> = [];

  private nextKind(): 'tool' | 'chat' {
    return this.kinds.shift() ?? (this.w.int(3) === 0 ? 'chat' : 'tool');
  }

  /** Sends the conversation as it stands. */
  send(
    truth: { expect: BustCause | null; injected?: boolean; line?: Line },
    how: {
      idleMs?: number;
      parallelWithPrevious?: boolean;
      stallMs?: number;
      conv?: Conversation;
      headers?: Record<string, string>;
      kind?: RequestKind;
      /** Breaks the body (for a request the upstream must refuse). */
      corrupt?: (body: Json) => void;
    } = {},
  ): void {
    const conv = how.conv ?? this.conv;
    // A copy: later edits of the conversation must not reach a body already planned.
    const body = structuredClone(render(conv, this.o.format));
    how.corrupt?.(body);
    this.requests.push({
      kind: how.kind ?? 'turn',
      session: this.o.name,
      event: this.o.event,
      scheme: this.o.scheme,
      format: this.o.format,
      body,
      headers: { ...(how.headers ?? this.headers) },
      idleMs: how.idleMs ?? 15_000 + this.w.int(30_000),
      parallelWithPrevious: how.parallelWithPrevious ?? false,
      stallMs: how.stallMs ?? 0,
      stream: this.stream,
      expect: truth.expect,
      injected: truth.injected ?? false,
      line: truth.line ?? 'main',
    });
  }

  /** A copy of the conversation (for a fork or a sibling that goes its own way). */
  fork(): Conversation {
    return structuredClone(this.conv);
  }

  tool(name: string): ToolDef {
    return makeTool(name, this.w);
  }

  /** The index in `items` of the n-th user text message (0-based), for edits deep in the history. */
  userItem(n: number): number {
    let seen = -1;
    for (let i = 0; i < this.conv.items.length; i++) {
      const it = this.conv.items[i] as Item;
      if (it.kind === 'user' && ++seen === n) return i;
    }
    return 0;
  }
}

/**
 * Claude Code or Codex: the client's own system prompt and tools (shared by all its sessions), its context
 * messages, its fixed parameters, and its session id where it puts it (header and metadata, or
 * prompt_cache_key).
 */
function clientStyle(s: Session, style: Exclude<Style, 'plain'>, key: string): void {
  const uuid = uuidOf(key);
  const c = s.conv;
  c.context = {
    billing: uuid.slice(0, 3),
    reminder: "<system-reminder>\n# currentDate\nToday's date is 2026-12-01.\n</system-reminder>",
    agents: style === 'codex' ? SKILLS : AGENTS_LIST,
    environment: `<environment_context><cwd>/work/repo-${s.w.int(3)}</cwd><shell>bash</shell><current_date>2026-12-01</current_date></environment_context>`,
    agentsMd: `# AGENTS.md instructions for the repository\n${s.w.paragraph(12)}`,
  };
  if (style === 'claude-code') {
    c.system = CLAUDE_CODE_PROMPT;
    c.tools = structuredClone(CLAUDE_CODE_TOOL_DEFS);
    Object.assign(c.fields, {
      max_tokens: 64000,
      thinking: { type: 'adaptive' },
      context_management: { edits: [{ type: 'clear_thinking_20251015', keep: 'all' }] },
      output_config: { effort: 'high' },
      metadata: {
        user_id: JSON.stringify({ device_id: 'd'.repeat(64), account_uuid: '', session_id: uuid }),
      },
    });
    s.headers['x-claude-code-session-id'] = uuid;
    s.headers['anthropic-beta'] =
      'claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27';
  } else {
    c.system = CODEX_BASE;
    c.tools = structuredClone(CODEX_TOOL_DEFS);
    Object.assign(c.fields, {
      tool_choice: 'auto',
      parallel_tool_calls: true,
      reasoning: { effort: 'medium' },
      include: ['reasoning.encrypted_content'],
      prompt_cache_key: uuid,
      text: { verbosity: 'low' },
    });
  }
}

/** Puts the session label where the client would: a header, the body's metadata or prompt_cache_key. */
export function applyLabel(s: Session, mode: LabelMode, key: string): void {
  delete s.headers['x-cacheward-session'];
  delete s.headers['x-claude-code-session-id'];
  delete s.conv.fields.metadata;
  delete s.conv.fields.prompt_cache_key;
  const uuid = uuidOf(key);
  if (mode === 'header') s.headers['x-cacheward-session'] = key;
  else if (mode === 'claude-code') s.headers['x-claude-code-session-id'] = uuid;
  else if (mode === 'metadata')
    s.conv.fields.metadata = { user_id: `user_${uuid.slice(0, 8)}_account__session_${uuid}` };
  else if (mode === 'prompt_cache_key') s.conv.fields.prompt_cache_key = key;
}

/** A stable uuid-shaped id for a key (no randomness: the corpus is reproducible). */
function uuidOf(key: string): string {
  let h1 = 0x811c9dc5;
  let h2 = 0x1234567;
  for (let i = 0; i < key.length; i++) {
    h1 = Math.imul(h1 ^ key.charCodeAt(i), 16777619) >>> 0;
    h2 = Math.imul(h2 ^ key.charCodeAt(i), 2246822519) >>> 0;
  }
  const hex = (h1.toString(16).padStart(8, '0') + h2.toString(16).padStart(8, '0')).repeat(2);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-a${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
}
