// Generates realistic, deterministic agent traffic (tools, a long system prompt, tool loops) for the
// demo, tests and benchmarks. Seeded: the same options always give the same bytes. No I/O.

import type { Json } from '../core/json.js';

/** A small seeded PRNG (mulberry32), so generated traffic is reproducible byte for byte. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const WORDS = (
  'the a cache prefix agent tool request session token write read model system message user assistant ' +
  'file path function return value error result context budget summary review memory skill update stable ' +
  'byte order schema field parse build test run check commit branch merge config option default limit ' +
  'when before after every only never always should must may will each other this that with from into'
).split(' ');

function sentence(rand: () => number, words: number): string {
  const out: string[] = [];
  for (let i = 0; i < words; i++) out.push(WORDS[Math.floor(rand() * WORDS.length)] as string);
  const s = out.join(' ');
  return `${s.charAt(0).toUpperCase()}${s.slice(1)}.`;
}

function paragraph(rand: () => number, sentences: number): string {
  const out: string[] = [];
  for (let i = 0; i < sentences; i++) out.push(sentence(rand, 8 + Math.floor(rand() * 12)));
  return out.join(' ');
}

function codeFile(rand: () => number, lines: number): string {
  const out: string[] = [];
  for (let i = 0; i < lines; i++) {
    const indent = '  '.repeat(Math.floor(rand() * 3));
    const name = `${WORDS[Math.floor(rand() * WORDS.length)]}${Math.floor(rand() * 100)}`;
    out.push(`${indent}const ${name} = ${Math.floor(rand() * 1000)}; // ${sentence(rand, 4)}`);
  }
  return out.join('\n');
}

/** Names of the tools an agent like Claude Code sends, in its order. */
export const AGENT_TOOL_NAMES = [
  'Bash',
  'Glob',
  'Grep',
  'Read',
  'Edit',
  'Write',
  'TodoWrite',
  'WebFetch',
  'WebSearch',
  'Task',
  'NotebookEdit',
  'skill_manage',
  'memory',
] as const;

/** An Anthropic tool definition with a plausible description and schema. */
export function anthropicTool(name: string, seed = 1): Json {
  const rand = seededRandom(seed * 7919 + name.length * 31 + name.charCodeAt(0));
  return {
    name,
    description: `${name}: ${paragraph(rand, 6)}`,
    input_schema: {
      type: 'object',
      properties: {
        path: { type: 'string', description: sentence(rand, 10) },
        content: { type: 'string', description: sentence(rand, 12) },
        options: { type: 'object', properties: { limit: { type: 'integer' }, force: { type: 'boolean' } } },
      },
      required: ['path'],
      additionalProperties: false,
    },
  };
}

/** Options for {@link agentConversation}. */
export interface ConversationOptions {
  model?: string;
  tools?: readonly string[];
  turns?: number;
  seed?: number;
  /** Lines of file content in each tool result (sets the size of the context). */
  fileLines?: number;
  /** Put a `cache_control` marker on the last block of the last message (as agents do). */
  cacheLast?: boolean;
  /** Extra system text appended to the system prompt. */
  systemSuffix?: string;
}

/**
 * An Anthropic Messages body of an agent session after `turns` tool-loop turns: user asks, assistant
 * reads a file with a tool, the tool result comes back, assistant answers.
 */
export function agentConversation(options: ConversationOptions = {}): Json {
  const seed = options.seed ?? 42;
  const rand = seededRandom(seed);
  const turns = options.turns ?? 12;
  const fileLines = options.fileLines ?? 60;
  const systemText = `You are a careful coding agent. ${paragraph(rand, 40)}${options.systemSuffix ?? ''}`;
  const messages: Json[] = [];
  for (let t = 0; t < turns; t++) {
    const id = `toolu_${seed}_${t}`;
    messages.push({ role: 'user', content: [{ type: 'text', text: `Turn ${t}: ${paragraph(rand, 2)}` }] });
    messages.push({
      role: 'assistant',
      content: [
        { type: 'text', text: paragraph(rand, 1) },
        { type: 'tool_use', id, name: 'Read', input: { path: `src/module_${t}.ts` } },
      ],
    });
    messages.push({
      role: 'user',
      content: [{ type: 'tool_result', tool_use_id: id, content: codeFile(rand, fileLines) }],
    });
    messages.push({ role: 'assistant', content: [{ type: 'text', text: paragraph(rand, 3) }] });
  }
  messages.push({ role: 'user', content: [{ type: 'text', text: `Now: ${paragraph(rand, 1)}` }] });
  if (options.cacheLast !== false) {
    const last = messages[messages.length - 1] as { content: Json[] };
    const block = last.content[last.content.length - 1] as Json;
    block.cache_control = { type: 'ephemeral' };
  }
  return {
    model: options.model ?? 'claude-opus-5',
    max_tokens: 4096,
    tools: (options.tools ?? AGENT_TOOL_NAMES).map((n) => anthropicTool(n)),
    system: [{ type: 'text', text: systemText, cache_control: { type: 'ephemeral' } }],
    messages,
  };
}

/** Appends a user turn (a new text block) to a body, moving the trailing cache marker to it. */
export function appendUserTurn(body: Json, text: string): Json {
  const next = structuredClone(body);
  const messages = next.messages as Array<{ role: string; content: Json[] | string }>;
  for (const m of messages) {
    if (Array.isArray(m.content)) for (const b of m.content) delete b.cache_control;
  }
  messages.push({ role: 'assistant', content: [{ type: 'text', text: 'Done.' }] });
  messages.push({ role: 'user', content: [{ type: 'text', text, cache_control: { type: 'ephemeral' } }] });
  return next;
}
