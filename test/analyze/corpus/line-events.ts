// Events between conversations: review forks under the parent's label and their own, a correct summary
// fork, a subagent under the same label, strangers that share a system prompt, a session with no label.

import type { Conversation, Json } from './conversation.js';
import { always, type EventDef, linear, type SessionSpec, SMALL_MODEL, session } from './event-shapes.js';
import { type LabelMode, type PlannedRequest, Session } from './session.js';
import { STALL } from './time-events.js';

/** A label of its own for a request that is not the session's (a review agent under another name). */
function ownLabel(s: Session): { headers: Record<string, string>; fields: Json } {
  const other = new Session({
    ...s.o,
    name: `${s.o.name}-review`,
    seed: s.o.seed + 1,
    label: s.o.label === 'none' ? 'header' : s.o.label,
  });
  const fields: Json = {};
  for (const k of ['metadata', 'prompt_cache_key'])
    if (other.conv.fields[k] !== undefined) fields[k] = other.conv.fields[k];
  return { headers: other.headers, fields };
}

/**
 * The main line up to a parent request, then a fork of it and the main line's next turn (in either order),
 * then the main line going on. The fork's conversation is the parent's plus one reply and its own ask.
 */
function forkSession(spec: SessionSpec, event: string, kind: 'review' | 'summary', own: boolean) {
  const s = session(spec, event);
  const at = 3 + s.w.int(3);
  s.send({ expect: 'cold_start' });
  for (let t = 2; t < at; t++) {
    s.step();
    s.send({ expect: null });
  }
  const reply = s.w.paragraph(1);
  const fork: Conversation = s.fork();
  fork.items.push(
    { kind: 'assistant', text: reply },
    {
      kind: 'user',
      parts: [
        {
          text:
            kind === 'review'
              ? 'Review the conversation and update memory and skills.'
              : 'Summarize the conversation so far in five bullets.',
        },
      ],
    },
  );
  if (kind === 'review') fork.tools.push(s.tool('review_notes'), s.tool('skill_manage'));
  let headers = s.headers;
  if (own) {
    const o = ownLabel(s);
    headers = o.headers;
    delete fork.fields.metadata;
    delete fork.fields.prompt_cache_key;
    Object.assign(fork.fields, o.fields);
  }
  // Under a label of its own it is never a fork of the parent's session (when that has a label): a
  // conversation of its own, whose first request is a cold start (warm from the parent's session where it
  // read the parent's cache).
  const parentLabelled = (s.o.style ?? 'plain') !== 'plain' || s.o.label !== 'none';
  const truth =
    own && parentLabelled
      ? ({ expect: 'cold_start', injected: true, line: 'main' } as const)
      : ({ expect: kind === 'review' ? 'fork_diverged' : null, injected: true, line: 'fork' } as const);
  const sendFork = () => s.send(truth, { conv: fork, headers });
  // The fork goes out before the main line's next turn, after it, or at the same time.
  const order = s.w.int(3);
  if (order === 0) sendFork();
  s.conv.items.push(
    { kind: 'assistant', text: reply },
    { kind: 'user', parts: [{ text: s.w.paragraph(1) }] },
  );
  s.send({ expect: null }, order === 2 ? { stallMs: STALL } : {});
  if (order === 1) sendFork();
  if (order === 2) s.send(truth, { conv: fork, headers, parallelWithPrevious: true });
  for (let t = 0; t < 2; t++) {
    s.step();
    s.send({ expect: null });
  }
  return s.requests;
}

export const forkEvents: EventDef[] = [
  {
    name: 'review_fork_parent_label',
    applies: always,
    build: (spec) => forkSession(spec, 'review_fork_parent_label', 'review', false),
  },
  {
    name: 'review_fork_own_label',
    applies: always,
    build: (spec) => forkSession(spec, 'review_fork_own_label', 'review', true),
  },
  {
    name: 'summary_fork',
    applies: always,
    build: (spec) => forkSession(spec, 'summary_fork', 'summary', false),
  },
  {
    name: 'subagent',
    applies: always,
    build: (spec) => {
      // Claude Code's subagent keeps the model, disables thinking, drops context management and some
      // tools; the SDK-style one runs on a small model (Haiku) with tools and a prompt of its own.
      const cc = spec.style === 'claude-code' && spec.scheme === 'anthropic';
      const label: LabelMode = spec.scheme === 'anthropic' ? 'claude-code' : 'header';
      const s = session(spec, 'subagent', cc ? {} : { label });
      const sub = new Session({
        ...s.o,
        name: `${spec.name}-subagent`,
        seed: spec.seed * 7 + 3,
        model: cc ? s.conv.model : SMALL_MODEL[spec.scheme],
        systemSentences: spec.scheme === 'anthropic' ? 260 : 60,
        tools: ['Read', 'Grep', 'Glob'],
      });
      if (cc) {
        sub.conv.subagent = true;
        sub.conv.system = `You are an agent for Claude Code. ${sub.w.paragraph(40)}`;
        sub.conv.tools = s.conv.tools.filter((t) => !['Agent', 'Skill', 'TaskCreate'].includes(t.name));
        sub.conv.fields.thinking = { type: 'disabled' };
        delete sub.conv.fields.context_management;
      }
      // The same session label as the main line (Claude Code sends one session id for both).
      Object.assign(sub.headers, s.headers);
      for (const k of ['metadata', 'prompt_cache_key'])
        if (s.conv.fields[k] !== undefined) sub.conv.fields[k] = s.conv.fields[k];
      const at = 3 + s.w.int(3);
      s.send({ expect: 'cold_start' });
      for (let t = 2; t <= at + 2; t++) {
        s.step();
        s.send({ expect: null });
        if (t === at) {
          // Claude Code's Agent tool: a subagent under the same session id, with its own prompt.
          sub.send({ expect: 'cold_start', injected: true, line: 'sibling' });
          sub.step();
          sub.send({ expect: null, line: 'sibling' });
          s.requests.push(...sub.requests.splice(0));
        }
      }
      return s.requests;
    },
  },
  {
    name: 'unrelated_shared_system',
    applies: always,
    build: (spec) => {
      const a = session(spec, 'unrelated_shared_system');
      const b = session({ ...spec, seed: spec.seed + 1 }, 'unrelated_shared_system', {
        name: `${spec.name}-b`,
        label: a.o.label,
        style: a.conv.style,
        model: a.conv.model,
      });
      b.conv.tools = structuredClone(a.conv.tools);
      b.conv.system = a.conv.system;
      // The same repository: Codex's environment and AGENTS.md messages are the same too; an SDK app
      // sends the same context message before each task.
      if (a.conv.context && b.conv.context)
        b.conv.context = { ...a.conv.context, billing: b.conv.context.billing };
      else {
        const opening = {
          kind: 'user' as const,
          parts: [{ text: `<context>${a.w.paragraph(8)}</context>` }],
        };
        a.conv.items.unshift(structuredClone(opening));
        b.conv.items.unshift(structuredClone(opening));
      }
      const out: PlannedRequest[] = [];
      for (let t = 1; t <= 4; t++) {
        for (const s of [a, b]) {
          if (t > 1) s.step();
          s.send({ expect: t === 1 ? 'cold_start' : null, injected: s === b && t <= 2 });
          out.push(...s.requests.splice(0));
        }
      }
      return out;
    },
  },
  {
    name: 'no_label_tool_added',
    applies: always,
    build: (spec) =>
      linear(session(spec, 'no_label_tool_added', { label: 'none' }), (s) => {
        s.step();
        s.conv.tools.push(s.tool(`mcp__fs__write_${s.o.seed}`));
        return { expect: 'tools_changed', stepped: true };
      }),
  },
];
