// An abstract agent conversation (tools, system prompt, items, parameters) and the body each wire format
// sends for it: Anthropic Messages, OpenAI Chat Completions, OpenAI Responses. Pure: no I/O, no clock.

import { seededRandom } from '../../../src/sim/agent-conversation.js';

export type Json = Record<string, unknown>;
export type Format = 'anthropic' | 'chat' | 'responses';
/**
 * How the client shapes its requests: `plain` (an SDK user), `claude-code` (Anthropic, as Claude Code
 * 2.1.195 sends them) or `codex` (Responses, as Codex 0.171.0 does), after docs/real-clients.md.
 */
export type Style = 'plain' | 'claude-code' | 'codex';

export interface ToolDef {
  name: string;
  description: string;
  schema: Json;
}

/** A part of a user message: text, or a small PNG. */
export type UserPart = { text: string } | { image: string };

/** What the conversation holds, in order. A request always ends with a user message or a tool result. */
export type Item =
  | { kind: 'user'; parts: UserPart[] }
  | { kind: 'assistant'; text: string; thinking?: string }
  | { kind: 'call'; id: string; name: string; input: Json; text: string; thinking?: string }
  | { kind: 'result'; id: string; output: string };

export interface Conversation {
  model: string;
  tools: ToolDef[];
  system: string;
  items: Item[];
  /** Top-level fields merged into the body: render parameters, prompt_cache_key, metadata. */
  fields: Json;
  /** Anthropic: the TTL of the system breakpoint and of the moving one on the last message. */
  ttl: { system: '5m' | '1h'; messages: '5m' | '1h' };
  /** OpenAI GPT-5.6+ explicit mode: a breakpoint on every user message (and the developer prompt). */
  explicit: boolean;
  style: Style;
  /** Anthropic: the moving breakpoint is a top-level `cache_control` (automatic caching), not a marker. */
  automatic: boolean;
  /**
   * Anthropic: the replies' thinking blocks are left out of the request (as a client does when it resumes
   * a session on another model: the older thinking is dropped, every other block is resent as it was).
   */
  dropThinking?: boolean;
  /** Claude Code: a subagent's billing line and system message differ from the main line's. */
  subagent?: boolean;
  /** Claude Code's date reminder and agents list, Codex's skills, environment and AGENTS.md context. */
  context?: { billing: string; reminder: string; agents: string; environment: string; agentsMd: string };
}

export const PNG_1PX =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';

const WORDS = (
  'the a cache prefix agent tool request session token write read model system message user file path ' +
  'function return value error result context budget summary review memory skill update stable byte order ' +
  'schema field parse build test run check commit branch merge config option default limit when before ' +
  'after every only never always should must may will each other this that with from into module index'
).split(' ');

/** Seeded text: the same seed always gives the same words. */
export class Words {
  private readonly rand: () => number;
  constructor(seed: number) {
    this.rand = seededRandom(seed);
  }
  int(n: number): number {
    return Math.floor(this.rand() * n);
  }
  pick<T>(list: readonly T[]): T {
    return list[this.int(list.length)] as T;
  }
  sentence(words = 8 + this.int(10)): string {
    const out: string[] = [];
    for (let i = 0; i < words; i++) out.push(this.pick(WORDS));
    const s = out.join(' ');
    return `${s.charAt(0).toUpperCase()}${s.slice(1)}.`;
  }
  paragraph(sentences: number): string {
    return Array.from({ length: sentences }, () => this.sentence()).join(' ');
  }
  code(lines: number): string {
    return Array.from(
      { length: lines },
      (_, i) => `${'  '.repeat(i % 3)}const ${this.pick(WORDS)}${this.int(100)} = ${this.int(1000)};`,
    ).join('\n');
  }
}

/** A tool definition with a seeded description and schema. */
export function makeTool(name: string, w: Words): ToolDef {
  return {
    name,
    description: `${name}: ${w.paragraph(3)}`,
    schema: {
      type: 'object',
      properties: {
        path: { type: 'string', description: w.sentence(8) },
        limit: { type: 'integer', description: w.sentence(6) },
      },
      required: ['path'],
    },
  };
}

/** The body this conversation sends in `format`. */
export function render(c: Conversation, format: Format): Json {
  if (format === 'anthropic') return renderAnthropic(c);
  if (format === 'chat') return renderChat(c);
  return renderResponses(c);
}

function renderAnthropic(c: Conversation): Json {
  const messages: Array<{ role: string; content: Json[] }> = [];
  const push = (role: string, blocks: Json[]) => {
    const last = messages[messages.length - 1];
    if (last?.role === role) last.content.push(...blocks);
    else messages.push({ role, content: blocks });
  };
  for (const it of c.items) {
    if (it.kind === 'user')
      push(
        'user',
        it.parts.map((p) =>
          'text' in p
            ? { type: 'text', text: p.text }
            : { type: 'image', source: { type: 'base64', media_type: 'image/png', data: p.image } },
        ),
      );
    else if (it.kind === 'assistant')
      push('assistant', [...thinkingBlock(c, it), { type: 'text', text: it.text }]);
    else if (it.kind === 'call')
      push('assistant', [
        ...thinkingBlock(c, it),
        { type: 'text', text: it.text },
        { type: 'tool_use', id: it.id, name: it.name, input: it.input },
      ]);
    else push('user', [{ type: 'tool_result', tool_use_id: it.id, content: it.output }]);
  }
  let system: Json[] = [{ type: 'text', text: c.system, cache_control: marker(c.ttl.system) }];
  if (c.style === 'claude-code' && c.context) {
    // A date reminder before the first prompt, a mid-conversation system message with the agent types
    // after it, and a billing line (no marker) before the two marked system blocks.
    messages[0]?.content.unshift({ type: 'text', text: c.context.reminder });
    messages.splice(1, 0, { role: 'system', content: [{ type: 'text', text: c.context.agents }] });
    system = [
      {
        type: 'text',
        text: `x-anthropic-billing-header: cc_version=2.1.195.${c.context.billing}; cc_entrypoint=sdk-cli;${c.subagent ? ' cc_is_subagent=true;' : ''}`,
      },
      {
        type: 'text',
        text: "You are a Claude agent, built on Anthropic's Claude Agent SDK.",
        cache_control: marker(c.ttl.system),
      },
      ...system,
    ];
  }
  // The moving breakpoint: the last block of the latest user message.
  const lastUser = [...messages].reverse().find((m) => m.role === 'user');
  const lastBlock = lastUser?.content[lastUser.content.length - 1];
  if (lastBlock && !c.automatic) lastBlock.cache_control = marker(c.ttl.messages);
  return {
    model: c.model,
    max_tokens: 1024,
    ...(c.automatic ? { cache_control: marker(c.ttl.messages) } : {}),
    tools: c.tools.map((t) => ({ name: t.name, description: t.description, input_schema: t.schema })),
    system,
    messages,
    ...c.fields,
  };
}

/** A reply's thinking block as the client sends it back (none once the client dropped them). */
function thinkingBlock(c: Conversation, it: { thinking?: string }): Json[] {
  if (it.thinking === undefined || c.dropThinking) return [];
  return [{ type: 'thinking', thinking: it.thinking, signature: 'c2lnbmVk' }];
}

const marker = (ttl: '5m' | '1h') =>
  ttl === '1h' ? { type: 'ephemeral', ttl: '1h' } : { type: 'ephemeral' };
const BREAKPOINT = { mode: 'explicit' };

function renderChat(c: Conversation): Json {
  const messages: Json[] = [
    c.explicit
      ? {
          role: 'developer',
          content: [{ type: 'text', text: c.system, prompt_cache_breakpoint: BREAKPOINT }],
        }
      : { role: 'developer', content: c.system },
  ];
  for (const it of c.items) {
    if (it.kind === 'user') messages.push({ role: 'user', content: chatUserContent(it.parts, c.explicit) });
    else if (it.kind === 'assistant') messages.push({ role: 'assistant', content: it.text });
    else if (it.kind === 'call')
      messages.push({
        role: 'assistant',
        content: it.text,
        tool_calls: [
          { id: it.id, type: 'function', function: { name: it.name, arguments: JSON.stringify(it.input) } },
        ],
      });
    else messages.push({ role: 'tool', tool_call_id: it.id, content: it.output });
  }
  return {
    model: c.model,
    tools: c.tools.map((t) => ({
      type: 'function',
      function: { name: t.name, description: t.description, parameters: t.schema },
    })),
    messages,
    ...(c.explicit ? { prompt_cache_options: { mode: 'explicit' } } : {}),
    ...c.fields,
  };
}

function chatUserContent(parts: UserPart[], explicit: boolean): unknown {
  const only = parts[0];
  if (!explicit && parts.length === 1 && only && 'text' in only) return only.text;
  const out: Json[] = parts.map((p) =>
    'text' in p
      ? { type: 'text', text: p.text }
      : { type: 'image_url', image_url: { url: `data:image/png;base64,${p.image}` } },
  );
  if (explicit) (out[out.length - 1] as Json).prompt_cache_breakpoint = BREAKPOINT;
  return out;
}

function renderResponses(c: Conversation): Json {
  const input: Json[] = [];
  const codex = c.style === 'codex' && c.context;
  if (codex && c.context) {
    // No instructions: the base instructions and skills are developer messages, then the environment and
    // the repository's AGENTS.md as user messages, then the conversation.
    input.push(
      { role: 'developer', content: c.system },
      { role: 'developer', content: c.context.agents },
      { role: 'user', content: c.context.environment },
      { role: 'user', content: c.context.agentsMd },
    );
  }
  for (const it of c.items) {
    if (it.kind === 'user') input.push({ role: 'user', content: responsesUserContent(it.parts, c.explicit) });
    else if (it.kind === 'assistant') input.push({ role: 'assistant', content: it.text });
    else if (it.kind === 'call') {
      input.push({ role: 'assistant', content: it.text });
      input.push({
        type: 'function_call',
        call_id: it.id,
        name: it.name,
        arguments: JSON.stringify(it.input),
      });
    } else input.push({ type: 'function_call_output', call_id: it.id, output: it.output });
  }
  return {
    model: c.model,
    ...(codex ? {} : { instructions: c.system }),
    tools: c.tools.map((t) => ({
      type: 'function',
      name: t.name,
      description: t.description,
      parameters: t.schema,
      strict: false,
    })),
    input,
    store: false,
    ...(c.explicit ? { prompt_cache_options: { mode: 'explicit' } } : {}),
    ...c.fields,
  };
}

function responsesUserContent(parts: UserPart[], explicit: boolean): unknown {
  const only = parts[0];
  if (!explicit && parts.length === 1 && only && 'text' in only) return only.text;
  const out: Json[] = parts.map((p) =>
    'text' in p
      ? { type: 'input_text', text: p.text }
      : { type: 'input_image', image_url: `data:image/png;base64,${p.image}`, detail: 'low' },
  );
  if (explicit) (out[out.length - 1] as Json).prompt_cache_breakpoint = BREAKPOINT;
  return out;
}
