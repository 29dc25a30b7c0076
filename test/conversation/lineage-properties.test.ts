// Properties of the lineage rules over generated sessions (fast-check): labels that differ are never one
// line or a fork of each other; every request whose reply the next one carries is the main line, whatever a
// resume re-serialized (thinking dropped, model switched) or a one-off system change did; a fork the main
// line never carries on is a fork; a label that starts with another's history starts warm from it.

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ConversationTracker } from '../../src/conversation/conversation-tracker.js';
import { PrefixBuilder } from '../../src/prefix/build-prefix.js';

type Json = Record<string, unknown>;
const ROUTE = '/v1/messages';

/** One step of a generated traffic: which session acts, and how. */
type Op =
  | { kind: 'turn'; session: number }
  | { kind: 'fork'; session: number; after: boolean }
  | { kind: 'resume'; session: number; model: boolean }
  | { kind: 'oneOff'; session: number }
  | { kind: 'rerun'; session: number };

const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ kind: fc.constant('turn' as const), session: fc.nat(2) }) },
  {
    weight: 2,
    arbitrary: fc.record({ kind: fc.constant('fork' as const), session: fc.nat(2), after: fc.boolean() }),
  },
  {
    weight: 2,
    arbitrary: fc.record({ kind: fc.constant('resume' as const), session: fc.nat(2), model: fc.boolean() }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('oneOff' as const), session: fc.nat(2) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('rerun' as const), session: fc.nat(2) }) },
);

interface Reply {
  text: string;
  thinking?: string;
}

/** A session as its client holds it: label, model, system prompt, and the conversation so far. */
interface Sim {
  label: string;
  model: string;
  system: string;
  /** User inputs and replies, alternating, starting with a user input. */
  turns: Array<{ user: string; reply?: Reply }>;
  /** The client resent the history without the older replies' thinking (a resume on another model). */
  dropThinking: boolean;
  /** Main-line requests sent, in order (a request's reply is carried by the next one's). */
  main: string[];
}

/** What a fork is, for the check: it must end up a fork once the main line carried on past its parent twice. */
interface ForkSent {
  id: string;
  session: number;
  mainAt: number;
}

/**
 * The request body. A fork (`extra`) is a background agent's: the history, a reply and its own ask, with
 * a tool of its own (so it does not keep the parent's cached prefix; see the resolver's swap rule).
 */
function body(s: Sim, extra?: { ask: string }, system = s.system): string {
  const messages: Json[] = [];
  for (const t of s.turns) {
    messages.push({ role: 'user', content: [{ type: 'text', text: t.user }] });
    if (t.reply) {
      const content: Json[] = [];
      if (t.reply.thinking && !s.dropThinking)
        content.push({ type: 'thinking', thinking: t.reply.thinking, signature: 'c2ln' });
      content.push({ type: 'text', text: t.reply.text });
      messages.push({ role: 'assistant', content });
    }
  }
  if (extra) {
    messages.push({ role: 'assistant', content: [{ type: 'text', text: 'a reply nobody else has' }] });
    messages.push({ role: 'user', content: [{ type: 'text', text: extra.ask }] });
  }
  return JSON.stringify({
    model: s.model,
    max_tokens: 256,
    system: [{ type: 'text', text: system }],
    tools: [
      { name: 'read', description: 'Read a file', input_schema: { type: 'object' } },
      ...(extra
        ? [{ name: 'review_notes', description: 'Write notes', input_schema: { type: 'object' } }]
        : []),
    ],
    messages,
  });
}

/** Runs the ops on three sessions (labels a, b, c) through one tracker; returns what to check. */
function run(ops: readonly Op[], seed: number) {
  const tracker = new ConversationTracker();
  const builder = new PrefixBuilder();
  let n = 0;
  let time = 0;
  const labelOf = new Map<string, string>();
  const warm = new Map<string, string | undefined>();
  const parentOf = new Map<string, string | undefined>();
  const send = (s: Sim, json: string): string => {
    const id = `r${++n}`;
    time += 1000;
    const prefix = builder.parse(json, { format: 'anthropic-messages' });
    const t = tracker.resolve(id, prefix, { 'x-cacheward-session': s.label }, time);
    tracker.commit(t, ROUTE, 200);
    labelOf.set(id, s.label);
    warm.set(id, t.resolution.warm?.label);
    parentOf.set(id, t.resolution.parent);
    return id;
  };
  const sims: Sim[] = ['a', 'b', 'c'].map((l, k) => ({
    label: `label-${l}`,
    model: 'claude-opus-5',
    system: `You are agent ${k}. Seed ${seed}.`,
    turns: [{ user: `task ${k} of ${seed}` }],
    dropThinking: false,
    main: [],
  }));
  const forks: ForkSent[] = [];
  const reruns: Array<{ first: string; from: string }> = [];
  let words = 0;
  const next = (s: Sim) => {
    const last = s.turns[s.turns.length - 1];
    if (last && !last.reply) {
      words++;
      last.reply = { text: `reply ${words}`, ...(words % 2 ? { thinking: `thought ${words}` } : {}) };
    }
    s.turns.push({ user: `input ${++words}` });
  };
  for (const o of ops) {
    const s = sims[o.session] as Sim;
    if (o.kind === 'turn') {
      if (s.main.length) next(s);
      s.main.push(send(s, body(s)));
    } else if (o.kind === 'fork' && s.main.length) {
      // On the main line's latest request, before or after the main line's next turn: a request that
      // nobody carries on.
      const fork = body(s, { ask: `fork ask ${++words}` });
      const mainAt = s.main.length;
      if (o.after) {
        next(s);
        s.main.push(send(s, body(s)));
      }
      forks.push({ id: send(s, fork), session: o.session, mainAt });
    } else if (o.kind === 'resume' && s.main.length) {
      // The history resent without the older replies' thinking, maybe on another model.
      next(s);
      s.dropThinking = true;
      if (o.model) s.model = s.model === 'claude-opus-5' ? 'claude-sonnet-5' : 'claude-opus-5';
      s.main.push(send(s, body(s)));
    } else if (o.kind === 'oneOff' && s.main.length) {
      // A timestamp in the system prompt for one turn; the next turn carries its reply without it.
      next(s);
      s.main.push(send(s, body(s, undefined, `${s.system} Now: ${words}.`)));
    } else if (o.kind === 'rerun' && s.main.length) {
      // The same session's first request again, under a label of its own (a CI re-run of one prompt).
      const copy: Sim = {
        ...s,
        model: 'claude-opus-5',
        label: `${s.label}-rerun-${++words}`,
        turns: [{ user: (s.turns[0] as { user: string }).user }],
        dropThinking: false,
        main: [],
      };
      const first = send(copy, body(copy));
      reruns.push({ first, from: s.label });
    }
  }
  const store = tracker.store;
  return { sims, forks, reruns, labelOf, warm, parentOf, store };
}

describe('lineage over generated sessions', () => {
  it('holds the rules for any interleaving of turns, forks, resumes, one-off changes and re-runs', () => {
    fc.assert(
      fc.property(fc.array(op, { minLength: 3, maxLength: 40 }), fc.nat(1_000), (ops, seed) => {
        const { sims, forks, reruns, labelOf, warm, parentOf, store } = run(ops, seed);
        // Another label's request is never a parent.
        for (const [id, parent] of parentOf)
          if (parent !== undefined) expect(labelOf.get(parent), id).toBe(labelOf.get(id));
        for (const s of sims) {
          // The requests whose reply the next one carries (the latest may still be a provisional line
          // beside a fork sent after it, until one of them is carried on).
          const main = s.main.slice(0, -1);
          if (!main.length) continue;
          // The main line is one conversation, every request of it after the first continues it.
          const conv = store.request(main[0] as string)?.conversation;
          for (const id of main) {
            const node = store.request(id);
            expect(node?.conversation, id).toBe(conv);
            if (id !== main[0]) expect(node?.relation, id).toBe('continues');
          }
        }
        // A fork the main line went on past twice is a fork.
        for (const f of forks) {
          const s = sims[f.session] as Sim;
          if (s.main.length < f.mainAt + 2) continue;
          expect(store.request(f.id)?.relation, f.id).toBe('fork');
        }
        // A re-run of a first request under a new label starts warm from the label it repeats.
        for (const r of reruns) {
          expect(store.request(r.first)?.relation).toBe('new');
          expect(warm.get(r.first)).toBe(r.from);
        }
      }),
      { numRuns: 200 },
    );
  });
});
