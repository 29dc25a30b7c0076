// Events that edit the prompt: tools added, removed, reordered or edited, the system prompt, earlier
// messages, each render parameter, the model, and Claude Code's --continue. Each names one cause.

import type { BustCause } from '../../../src/analyze/cause-table.js';
import { type Json, PNG_1PX } from './conversation.js';
import {
  always,
  anthropic,
  type EventDef,
  edit,
  linear,
  MIN,
  mergeField,
  openai,
  type SessionSpec,
  SWITCHED,
  session,
  setField,
} from './event-shapes.js';
import type { Session } from './session.js';

const tools = () => 'tools_changed' as const;
const params = () => 'params_changed' as const;
/**
 * The system prompt is `system` (Anthropic) or `instructions` (Responses); in Chat, and in Codex's input, it
 * is the leading developer message. Each is the system level: an edit of it is `system_changed`.
 */
const system = (_spec: SessionSpec): BustCause => 'system_changed';

export const toolEvents: EventDef[] = [
  edit('tool_added', always, tools, (s) => {
    const at = s.w.int(s.conv.tools.length + 1);
    s.conv.tools.splice(at, 0, s.tool(`mcp__db__query_${s.o.seed}`));
  }),
  edit('tool_removed', always, tools, (s) => {
    s.conv.tools.splice(s.w.int(s.conv.tools.length - 1), 1);
  }),
  edit('tool_removed_last', always, tools, (s) => {
    s.conv.tools.pop();
  }),
  edit('tool_reordered', always, tools, (s) => {
    const i = s.w.int(s.conv.tools.length - 1);
    const t = s.conv.tools;
    [t[i], t[i + 1]] = [t[i + 1] as (typeof t)[number], t[i] as (typeof t)[number]];
  }),
  edit('tool_description_edited', always, tools, (s) => {
    const t = s.conv.tools[s.w.int(s.conv.tools.length)];
    if (t) t.description = `${t.description} Updated: ${s.w.sentence(5)}`;
  }),
  edit('tool_schema_edited', always, tools, (s) => {
    const t = s.conv.tools[s.w.int(s.conv.tools.length)];
    if (t) (t.schema.properties as Json).force = { type: 'boolean' };
  }),
];

export const systemEvents: EventDef[] = [
  edit('system_edited', always, system, (s) => {
    const cut = Math.floor(s.conv.system.length / 2);
    s.conv.system = `${s.conv.system.slice(0, cut)} ${s.w.sentence(6)} ${s.conv.system.slice(cut)}`;
  }),
  edit('system_timestamped', always, system, (s) => {
    s.conv.system = `${s.conv.system}\nCurrent date: 2026-0${1 + s.w.int(9)}-1${s.w.int(10)}T0${s.w.int(10)}:00Z`;
  }),
];

/**
 * Message events edit the second user message, with chat turns around it so that what follows it was
 * cached on every scheme (explicit mode caches up to the latest user message only). The first message is
 * left alone: without a label, a conversation whose first message changed is a stranger (resolver doc).
 */
function messageEdit(name: string, mutate: (s: Session) => void): EventDef {
  return {
    name,
    applies: always,
    build: (spec) => {
      const s = session(spec, name);
      s.kinds.push('chat', 'chat', 'chat', 'chat', 'chat');
      const at = 4 + s.w.int(2);
      s.send({ expect: 'cold_start' });
      for (let t = 2; t <= at + 2; t++) {
        s.step();
        if (t === at) mutate(s);
        s.send(t === at ? { expect: 'messages_edited', injected: true } : { expect: null });
      }
      return s.requests;
    },
  };
}

export const messageEvents: EventDef[] = [
  messageEdit('message_edited', (s) => {
    const it = s.conv.items[s.userItem(1)];
    if (it?.kind === 'user') it.parts = [{ text: `${s.w.sentence(6)} (edited)` }];
  }),
  messageEdit('message_inserted', (s) => {
    const it = s.conv.items[s.userItem(1)];
    if (it?.kind === 'user')
      it.parts.unshift({ text: `<system-reminder>${s.w.sentence(8)}</system-reminder>` });
  }),
  // An old turn dropped from the history (the reply and the user message after it).
  messageEdit('message_removed', (s) => {
    s.conv.items.splice(1, 2);
  }),
];

const anthropicParams: Array<[string, (s: Session) => void]> = [
  ['param_tool_choice', (s) => setField(s, 'tool_choice', { type: 'any' })],
  [
    'param_disable_parallel_tool_use',
    (s) => setField(s, 'tool_choice', { type: 'auto', disable_parallel_tool_use: true }),
  ],
  [
    'param_thinking',
    (s) => {
      setField(s, 'thinking', { type: 'enabled', budget_tokens: 2048 });
      setField(s, 'max_tokens', 4096);
    },
  ],
  ['param_effort', (s) => mergeField(s, 'output_config', { effort: 'low' })],
  [
    'param_output_format',
    (s) =>
      mergeField(s, 'output_config', {
        format: { type: 'json_schema', schema: { type: 'object', properties: { a: { type: 'string' } } } },
      }),
  ],
  [
    'param_context_management',
    (s) => setField(s, 'context_management', { edits: [{ type: 'clear_tool_uses_20250919' }] }),
  ],
  ['param_speed', (s) => setField(s, 'speed', 'fast')],
  [
    'param_beta',
    (s) => {
      s.headers['anthropic-beta'] = 'fine-grained-tool-streaming-2025-05-14';
    },
  ],
  [
    'param_image',
    (s) => {
      s.conv.items.push(
        { kind: 'assistant', text: s.w.sentence() },
        { kind: 'user', parts: [{ text: 'What does this screenshot show?' }, { image: PNG_1PX }] },
      );
    },
  ],
];

const chatParams: Array<[string, (s: Session) => void]> = [
  ['param_parallel_tool_calls', (s) => setField(s, 'parallel_tool_calls', false)],
  ['param_response_format', (s) => setField(s, 'response_format', { type: 'json_object' })],
  ['param_reasoning_effort', (s) => setField(s, 'reasoning_effort', 'low')],
  ['param_verbosity', (s) => setField(s, 'verbosity', 'low')],
];

const responsesParams: Array<[string, (s: Session) => void]> = [
  ['param_parallel_tool_calls', (s) => setField(s, 'parallel_tool_calls', false)],
  ['param_text_format', (s) => mergeField(s, 'text', { format: { type: 'json_object' } })],
  ['param_text_verbosity', (s) => mergeField(s, 'text', { verbosity: 'high' })],
  ['param_reasoning_effort', (s) => mergeField(s, 'reasoning', { effort: 'high' })],
];

export const paramEvents: EventDef[] = [
  ...anthropicParams.map(([name, m]) =>
    edit(name, anthropic, params, m, { stepped: name === 'param_image' }),
  ),
  ...chatParams.map(([name, m]) => edit(`chat_${name}`, (_s, f) => f === 'chat', params, m)),
  ...responsesParams.map(([name, m]) => edit(`responses_${name}`, (_s, f) => f === 'responses', params, m)),
  edit('param_prompt_cache_key', openai, params, (s) => setField(s, 'prompt_cache_key', 'route-2'), {
    label: 'header',
  }),
  edit(
    'model_switch',
    always,
    () => 'model_changed',
    (s) => {
      s.conv.model = SWITCHED[s.conv.model] ?? s.conv.model;
    },
  ),
];

/**
 * Claude Code's `--continue` (docs/real-clients.md, finding 3): the same session id and transcript, but a
 * beta dropped, the model line of the system prompt and the Bash tool's description changed. The first
 * divergence is the Bash tool: one tools_changed, and the conversation goes on (no fork, no new session).
 */
export const resumeEvent: EventDef = {
  name: 'claude_code_continue',
  applies: anthropic,
  build: (spec) =>
    linear(session(spec, 'claude_code_continue', { style: 'claude-code' }), (s) => {
      s.step();
      s.headers['anthropic-beta'] = 'claude-code-20250219,interleaved-thinking-2025-05-14';
      s.conv.system = s.conv.system.replace(
        'You are an interactive agent',
        'You are an interactive agent (resumed)',
      );
      const bash = s.conv.tools.find((t) => t.name === 'Bash');
      if (bash) bash.description = `${bash.description} Co-Authored-By: Claude Opus 4.8`;
      return { expect: 'tools_changed', idleMs: (2 + s.w.int(3)) * MIN, stepped: true };
    }),
};
