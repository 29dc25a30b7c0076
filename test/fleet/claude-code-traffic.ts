// Claude Code-shaped conversations for the fleet tests: Claude Code's session header, beta list and
// metadata.user_id, a deferred MCP tool, a <system-reminder> that moves into its own message, and a tool
// that appears mid-session. Deterministic: the same conversation number always gives the same bytes.

import { agentConversation, anthropicTool, appendUserTurn } from '../../src/sim/agent-conversation.js';

export type Json = Record<string, unknown>;
type Msg = { role: string; content: Json[] | string };

export interface Turn {
  conversation: number;
  turn: number;
  body: Json;
  headers: Record<string, string>;
}

const TOOLS = ['Bash', 'Glob', 'Grep', 'Read', 'Edit', 'Write', 'TodoWrite', 'Task'];
const REMINDER = '<system-reminder>\nThe user opened src/app.ts in the IDE.\n</system-reminder>';

/** Turn 1..`turns` of conversation `n`. From turn 3 an MCP tool is loaded; from turn 4 the reminder moves. */
export function claudeCodeConversation(n: number, turns: number): Turn[] {
  let conv = agentConversation({
    turns: 3,
    tools: TOOLS,
    seed: 700 + n,
    fileLines: 30,
    // Each session's system prompt is its own, so sessions share no cache entry (their cache is theirs).
    systemSuffix: ` Working directory: /work/project-${n}.`,
  });
  conv.tools = [
    ...(conv.tools as Json[]),
    {
      name: 'mcp__ide__getDiagnostics',
      description: 'Get language diagnostics from the IDE',
      input_schema: { type: 'object', properties: {} },
      defer_loading: true,
    },
  ];
  conv.metadata = { user_id: `user_${n}abc_account_42_session_${n}0000000-aaaa-bbbb-cccc-dddddddddddd` };
  (((conv.messages as Msg[])[4] as Msg).content as Json[]).push({ type: 'text', text: REMINDER });
  const headers = {
    'x-claude-code-session-id': `${n}0000000-aaaa-bbbb-cccc-dddddddddddd`,
    'anthropic-beta': 'claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27',
  };
  const out: Turn[] = [];
  for (let turn = 1; turn <= turns; turn++) {
    const body = structuredClone(conv);
    if (turn >= 3) {
      const tools = body.tools as Json[];
      body.tools = [...tools.slice(0, 4), anthropicTool(`mcp__db${n}__query`), ...tools.slice(4)];
    }
    if (turn >= 4) {
      const msgs = body.messages as Msg[];
      const moved = ((msgs[4] as Msg).content as Json[]).pop() as Json;
      msgs.splice(5, 0, { role: 'user', content: [moved] });
    }
    out.push({ conversation: n, turn, body, headers });
    conv = appendUserTurn(conv, `Step ${turn + 1} of session ${n}: carry on with the plan.`);
  }
  return out;
}
