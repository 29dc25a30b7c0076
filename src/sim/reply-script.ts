// Scripted replies for the simulator: turn N of a conversation gets the script's turn N (text, tool calls,
// thinking, stop reason, delay or an error). Stateless: the turn is counted from the request itself, never
// from what the simulator saw before.

import { CachewardError } from '../core/errors.js';
import { isObj } from '../core/json.js';

/**
 * One scripted tool call. `type` `function` (the default) is a JSON tool call on every API; `custom` (a
 * freeform tool such as Codex's `apply_patch`, `input` its text) and `tool_search` (a client-executed
 * tool search, `input` its arguments) exist only on the Responses API, as does `namespace` (a tool
 * declared inside a `{"type": "namespace"}` tool, as Codex declares MCP tools).
 */
export interface ScriptedToolCall {
  name: string;
  type?: 'function' | 'custom' | 'tool_search';
  input?: unknown;
  id?: string;
  namespace?: string;
}

/** One scripted assistant turn. */
export interface ScriptedTurn {
  text?: string;
  thinking?: string;
  tool_calls?: ScriptedToolCall[];
  stop_reason?: string;
  /** Wait this long before the first byte of the response. */
  delay_ms?: number;
  /** Answer with this error instead of a reply. */
  error?: { status: number; message?: string };
}

/** Which of a request's messages a conversation's `match` is looked for in. */
export type MatchTarget = 'first_user' | 'latest_user' | 'any';

/**
 * A conversation's script: `match` is a substring of its first user message (omit it to match any), or
 * of its latest user message or of any message with `match_in`. The first conversation that matches plays.
 */
export interface ScriptedConversation {
  match?: string;
  match_in?: MatchTarget;
  turns: ScriptedTurn[];
}

export interface ReplyScript {
  conversations: ScriptedConversation[];
}

/** A script file that cannot be used: the message names the file and the JSON path. */
export class ReplyScriptError extends CachewardError {
  constructor(message: string) {
    super('CW_SIM_SCRIPT', message);
  }
}

/** Checks a parsed script; `source` names it in errors. */
export function parseReplyScript(value: unknown, source: string): ReplyScript {
  const fail = (path: string, what: string): never => {
    throw new ReplyScriptError(`${source}: ${path}: ${what}`);
  };
  if (!isObj(value) || !Array.isArray(value.conversations)) fail('$', 'expected {"conversations": [...]}');
  const conversations = (value as { conversations: unknown[] }).conversations;
  conversations.forEach((c, i) => {
    const at = `$.conversations[${i}]`;
    if (!isObj(c)) fail(at, 'expected an object');
    const conv = c as Record<string, unknown>;
    if (conv.match !== undefined && typeof conv.match !== 'string') fail(`${at}.match`, 'expected a string');
    if (conv.match_in !== undefined && !MATCH_TARGETS.includes(conv.match_in as MatchTarget)) {
      fail(`${at}.match_in`, `expected one of ${MATCH_TARGETS.join(', ')}`);
    }
    for (const key of Object.keys(conv)) {
      if (!['match', 'match_in', 'turns'].includes(key))
        fail(`${at}.${key}`, 'unknown field (match, match_in, turns)');
    }
    if (!Array.isArray(conv.turns)) fail(`${at}.turns`, 'expected an array of turns');
    (conv.turns as unknown[]).forEach((t, k) => {
      const tat = `${at}.turns[${k}]`;
      if (!isObj(t)) fail(tat, 'expected an object');
      const turn = t as Record<string, unknown>;
      for (const key of Object.keys(turn)) {
        if (!['text', 'thinking', 'tool_calls', 'stop_reason', 'delay_ms', 'error'].includes(key)) {
          fail(`${tat}.${key}`, 'unknown field (text, thinking, tool_calls, stop_reason, delay_ms, error)');
        }
      }
      for (const key of ['text', 'thinking', 'stop_reason'] as const) {
        if (turn[key] !== undefined && typeof turn[key] !== 'string')
          fail(`${tat}.${key}`, 'expected a string');
      }
      if (turn.delay_ms !== undefined && (typeof turn.delay_ms !== 'number' || turn.delay_ms < 0)) {
        fail(`${tat}.delay_ms`, 'expected a number of ms');
      }
      if (turn.tool_calls !== undefined) {
        if (!Array.isArray(turn.tool_calls)) fail(`${tat}.tool_calls`, 'expected an array');
        (turn.tool_calls as unknown[]).forEach((call, j) => {
          checkToolCall(call, `${tat}.tool_calls[${j}]`, fail);
        });
      }
      if (turn.error !== undefined) {
        const e = turn.error;
        if (!isObj(e) || typeof e.status !== 'number')
          fail(`${tat}.error`, 'expected {"status": 429, "message"?}');
      }
    });
  });
  return value as ReplyScript;
}

const MATCH_TARGETS: readonly MatchTarget[] = ['first_user', 'latest_user', 'any'];
const CALL_TYPES = ['function', 'custom', 'tool_search'];

function checkToolCall(call: unknown, at: string, fail: (path: string, what: string) => never): void {
  if (!isObj(call)) fail(at, 'expected {"name", "input"}');
  const c = call as Record<string, unknown>;
  for (const key of Object.keys(c)) {
    if (!['name', 'type', 'input', 'id', 'namespace'].includes(key))
      fail(`${at}.${key}`, 'unknown field (name, type, input, id, namespace)');
  }
  if (c.type !== undefined && !CALL_TYPES.includes(String(c.type)))
    fail(`${at}.type`, `expected one of ${CALL_TYPES.join(', ')}`);
  if (typeof c.name !== 'string' && c.type !== 'tool_search') fail(`${at}.name`, 'expected a string');
  if (c.type === 'custom' && c.input !== undefined && typeof c.input !== 'string')
    fail(`${at}.input`, 'a custom tool call takes its freeform input as a string');
  if (c.namespace !== undefined && typeof c.namespace !== 'string')
    fail(`${at}.namespace`, 'expected a string');
  if (c.id !== undefined && typeof c.id !== 'string') fail(`${at}.id`, 'expected a string');
}

/** The texts of a request's conversation that a `match` is looked for in (see script-match.ts). */
export interface ConversationText {
  firstUser: string;
  latestUser: string;
  /** Every message's text, in order. */
  all: readonly string[];
}

function matches(c: ScriptedConversation, text: ConversationText): boolean {
  if (c.match === undefined) return true;
  const needle = c.match;
  if (c.match_in === 'latest_user') return text.latestUser.includes(needle);
  if (c.match_in === 'any') return text.all.some((t) => t.includes(needle));
  return text.firstUser.includes(needle);
}

/**
 * The turn to play: the first matching conversation's turn `index`, else a short deterministic text.
 * `text` is read only when a script has a conversation to match (no script: the body's text is never joined).
 */
export function pickTurn(
  script: ReplyScript | undefined,
  text: () => ConversationText,
  index: number,
): ScriptedTurn {
  if (!script?.conversations.length) return defaultTurn(index);
  const read = text();
  const conv = script.conversations.find((c) => matches(c, read));
  return conv?.turns[index] ?? defaultTurn(index);
}

/**
 * Why a turn cannot be played on an API that has no such tool call (a custom, tool-search or namespaced
 * call outside the Responses API), or undefined when it can.
 */
export function unplayableOn(api: 'Messages' | 'Chat Completions', turn: ScriptedTurn): string | undefined {
  const call = turn.tool_calls?.find(
    (c) => (c.type ?? 'function') !== 'function' || c.namespace !== undefined,
  );
  if (!call) return undefined;
  const what =
    call.namespace !== undefined ? `a namespaced tool call (${call.namespace})` : `a ${call.type} tool call`;
  return `cacheward sim: the script plays ${what} here, which only the Responses API has; the ${api} API cannot send it. Give this conversation a match that only Responses traffic meets.`;
}

/** The default reply: short, deterministic, numbered by turn. */
export function defaultTurn(index: number): ScriptedTurn {
  return { text: `Simulated reply ${index + 1}.` };
}
