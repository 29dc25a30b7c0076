// Property test: the fix path (tools-freeze, pin-reminders) on a warm prefix builder forwards byte-identical
// bodies, notes and states to a cold one, for random interleaved Anthropic sessions under random edits.

import { describe, expect, it } from 'vitest';
import { drainSteps } from '../../src/core/steps.js';
import { runFixStage, runFixStageSteps } from '../../src/fixes/fix-stage.js';
import { fixRegistry } from '../../src/fixes/registry.js';
import { PrefixBuilder } from '../../src/prefix/build-prefix.js';
import { messageEnds } from '../../src/prefix/message-ends.js';
import { FixStateStore } from '../../src/state/fix-state-store.js';
import {
  type Conversation,
  editConversation,
  growConversation,
  newConversation,
  type Rand,
  seededRandom,
  serialize,
} from '../fixtures/fuzz-bodies.js';

type Json = Record<string, unknown>;
const format = 'anthropic-messages' as const;

/** What a client does to a reminder: moves it into its own message, merges it back, string versus array. */
function reshape(r: Rand, c: Conversation): string {
  const list = c.body.messages as Json[];
  const at = Math.floor(r() * list.length);
  const m = list[at] as Json;
  if (typeof m.content === 'string') {
    m.content = [{ type: 'text', text: m.content }];
    return 'to-array';
  }
  const blocks = m.content as Json[];
  if (blocks.length === 1 && (blocks[0] as Json).type === 'text' && r() < 0.5) {
    m.content = (blocks[0] as Json).text;
    return 'to-string';
  }
  if (blocks.length >= 2 && m.role === 'user') {
    const moved = blocks.pop() as Json;
    list.splice(at + 1, 0, { role: 'user', content: [moved] });
    return 'split-reminder';
  }
  const next = list[at + 1];
  if (next && next.role === m.role && Array.isArray(next.content)) {
    blocks.push(...(next.content as Json[]));
    list.splice(at + 1, 1);
    return 'merge-reminder';
  }
  blocks.push({ type: 'text', text: '<system-reminder>pinned</system-reminder>' });
  return 'add-reminder';
}

const outcome = (f: () => unknown) => {
  try {
    return f();
  } catch (e) {
    return { error: (e as Error).constructor.name, message: (e as Error).message };
  }
};

/** One session: each step's request through the fix stage on a warm and on a cold builder. */
function fuzzFixSession(seed: number, steps: number, parallel: number, seen: Set<string>): void {
  const r = seededRandom(seed);
  const convs = Array.from({ length: parallel }, (_, i) => newConversation(r, format, i));
  const fixes = fixRegistry().resolve(['tools-freeze', 'pin-reminders']);
  const warm = new PrefixBuilder();
  // The warm side keeps its states as the proxy does (shared parts, set in steps that may still be running
  // when the conversation's next request starts); the cold side in a plain map.
  const store = new FixStateStore();
  const pending: Array<Generator<void, void>> = [];
  const states = {
    warm: {
      get: (id: number) => store.get(`c${id}`),
      set: (id: number, st: ReadonlyMap<string, unknown>) => {
        const steps = store.setSteps(`c${id}`, st);
        if (r() < 0.5) drainSteps(steps);
        else if (!steps.next().done) pending.push(steps);
      },
    },
    cold: new Map<number, ReadonlyMap<string, unknown>>(),
  };
  const trail: string[] = [];
  for (let s = 0; s < steps; s++) {
    const c = convs[Math.floor(r() * convs.length)] as Conversation;
    const edit = s === 0 ? 'first' : r() < 0.3 ? reshape(r, c) : editConversation(r, c);
    const { bytes, edit: wire } = serialize(r, c);
    trail.push(`${c.id}:${edit}/${wire}`);
    seen.add(edit);
    const ctx = fixContext(s * 1000, c.id);
    const run = (which: 'warm' | 'cold') =>
      outcome(() => {
        const builder = () => (which === 'warm' ? warm : new PrefixBuilder());
        const prefix = builder().parse(bytes, { format });
        const out = runFixStage({
          fixes,
          body: bytes,
          prefix,
          headers: {},
          states: states[which].get(c.id),
          context: ctx,
          reparse: (next, h) => builder().parse(next, { format, headers: h }),
        });
        states[which].set(c.id, out.states);
        return {
          body: out.body.toString(),
          notes: out.notes,
          states: JSON.stringify([...out.states]),
          blocks: out.prefix.blocks,
          ends: messageEnds(out.prefix),
          clientEnds: messageEnds(prefix),
        };
      });
    while (pending.length && r() < 0.5) drainSteps(pending.shift() as Generator<void, void>);
    const got = run('warm');
    const want = run('cold');
    expect(got, `seed ${seed} step ${s} (${trail.slice(-6).join(' ')})`).toEqual(want);
    const w = want as { body?: string; notes?: string[]; error?: string };
    if (w.error) seen.add('error');
    else if (w.body !== bytes.toString()) seen.add('forwarded-changed');
    if (w.notes?.length) seen.add('noted');
  }
}

/** The fix context of conversation `id`'s request at `now`: an Anthropic turn that continues it. */
const fixContext = (now: number, id: number) => ({
  provider: 'anthropic' as const,
  route: '/v1/messages',
  now,
  conversation: `c${id}`,
  relation: 'continues' as const,
});

describe('the fix path on a warm builder forwards what a cold one forwards (random sessions)', () => {
  it('for single and interleaved Anthropic sessions with tool changes and reshaped reminders', () => {
    const seen = new Set<string>();
    const scale = Math.max(1, Number(process.env.CACHEWARD_FUZZ_SCALE) || 1);
    for (let seed = 1; seed <= 25 * scale; seed++) fuzzFixSession(seed, 25, 1 + (seed % 3), seen);
    // The edits were drawn and the fixes acted (changed forwarded bodies, notes), bad bodies included.
    for (const e of [
      'split-reminder',
      'merge-reminder',
      'to-string',
      'to-array',
      'tools',
      'append',
      'edit-old',
      'forwarded-changed',
      'noted',
      'error',
    ])
      expect(seen).toContain(e);
  });
});

describe('fix stages run in steps, interleaved on one warm builder (as the proxy runs them)', () => {
  it('forward what each would forward alone on a cold builder, long histories', () => {
    const fixes = fixRegistry().resolve(['tools-freeze', 'pin-reminders']);
    let yielded = 0;
    for (let seed = 400; seed < 403; seed++) {
      const r = seededRandom(seed);
      const convs = [0, 1, 2].map((i) => newConversation(r, format, i));
      for (const c of convs) growConversation(r, c, 300);
      const warm = new PrefixBuilder();
      // States kept as the proxy keeps them: shared in steps that may still run when the next request starts.
      const store = new FixStateStore();
      const last = new Map<number, string>();
      const commits: Array<Generator<void, void>> = [];
      for (let round = 0; round < 6; round++) {
        // A commit still in steps never hides or undoes a newer one: each conversation starts from its newest.
        for (const c of convs)
          expect(JSON.stringify([...(store.get(`c${c.id}`) ?? [])]), `seed ${seed} round ${round}`).toBe(
            last.get(c.id) ?? '[]',
          );
        const jobs = convs.map((c) => {
          const edit = round === 0 ? 'first' : r() < 0.3 ? reshape(r, c) : editConversation(r, c);
          const { bytes, edit: wire } = serialize(r, c);
          const input = store.get(`c${c.id}`);
          const ctx = fixContext(round * 1000, c.id);
          const stage = (builder: PrefixBuilder) =>
            function* () {
              const prefix = yield* builder.parseSteps(bytes, { format });
              const out = yield* runFixStageSteps({
                fixes,
                body: bytes,
                prefix,
                headers: {},
                states: input,
                context: ctx,
                reparse: (next, h) => builder.parse(next, { format, headers: h }),
                reparseSteps: (next, h) => builder.parseSteps(next, { format, headers: h }),
              });
              return {
                body: out.body.toString(),
                notes: out.notes,
                states: out.states,
                blocks: out.prefix.blocks,
                ends: messageEnds(out.prefix),
              };
            };
          return {
            c,
            label: `${c.id}:${edit}/${wire}`,
            steps: stage(warm)(),
            cold: stage(new PrefixBuilder()),
          };
        });
        const live = [...jobs];
        while (live.length) {
          const at = Math.floor(r() * live.length);
          const job = live[at] as (typeof live)[number];
          let got: unknown;
          try {
            const n = job.steps.next();
            if (!n.done) {
              yielded++;
              continue;
            }
            got = n.value;
          } catch (e) {
            got = outcome(() => {
              throw e;
            });
          }
          live.splice(at, 1);
          const want = outcome(() => drainSteps(job.cold()));
          const data = (x: unknown) => {
            const o = x as { states?: ReadonlyMap<string, unknown> };
            return o.states ? { ...o, states: JSON.stringify([...o.states]) } : x;
          };
          expect(data(got), `seed ${seed} round ${round} ${job.label}`).toEqual(data(want));
          const o = got as { states?: ReadonlyMap<string, unknown> };
          if (o.states) {
            last.set(job.c.id, JSON.stringify([...o.states]));
            const commit = store.setSteps(`c${job.c.id}`, o.states);
            if (!commit.next().done) commits.push(commit);
          }
          // Older commits go on in steps meanwhile, some finishing after a newer commit of theirs.
          for (const commit of commits.splice(0, Math.floor(r() * (commits.length + 1))))
            if (r() < 0.5) drainSteps(commit);
            else if (!commit.next().done) commits.push(commit);
        }
      }
    }
    expect(yielded).toBeGreaterThan(0);
  });
});
