// Scripted replies for the simulator: turn N of a conversation gets the script's turn N (text, tool calls,
// thinking, stop reason, delay or an error). Stateless: the turn is counted from the request itself.

import { CachewardError } from '../core/errors.js';

/** One scripted assistant turn. */
export interface ScriptedTurn {
  text?: string;
  thinking?: string;
  tool_calls?: Array<{ name: string; input?: unknown; id?: string }>;
  stop_reason?: string;
  /** Wait this long before the first byte of the response. */
  delay_ms?: number;
  /** Answer with this error instead of a reply. */
  error?: { status: number; message?: string };
}

/** A conversation's script: `match` is a substring of its first user message (omit it to match any). */
export interface ScriptedConversation {
  match?: string;
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

const isObj = (v: unknown): v is Record<string, unknown> =>
  v !== null && typeof v === 'object' && !Array.isArray(v);

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
          if (!isObj(call) || typeof call.name !== 'string')
            fail(`${tat}.tool_calls[${j}]`, 'expected {"name", "input"}');
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

/** The turn to play: the matching conversation's turn `index`, else a short deterministic text. */
export function pickTurn(
  script: ReplyScript | undefined,
  firstUserText: string,
  index: number,
): ScriptedTurn {
  const conv = script?.conversations.find((c) => c.match === undefined || firstUserText.includes(c.match));
  return conv?.turns[index] ?? defaultTurn(index);
}

/** The default reply: short, deterministic, numbered by turn. */
export function defaultTurn(index: number): ScriptedTurn {
  return { text: `Simulated reply ${index + 1}.` };
}
