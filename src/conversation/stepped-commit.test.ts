// The conversation model in bounded steps: the tracker's stepped resolve and commit give the same
// resolutions and the same store as the one-step ones, commits apply in order, and a resolution between two
// steps of a commit sees what commitConversationSteps documents.

import { describe, expect, it } from 'vitest';
import { drainSteps, STEP_ITEMS } from '../core/steps.js';
import { type Prefix, PrefixBuilder } from '../prefix/build-prefix.js';
import { messageEnds } from '../prefix/message-ends.js';
import { MemoryConversationStore } from './conversation-store.js';
import { ConversationTracker } from './conversation-tracker.js';

type Msg = { role: string; content: string };
const ROUTE = '/v1/messages';

/** `n` messages of one conversation (a user turn, then alternating), the same text for the same index. */
function history(n: number, edit?: { at: number; text: string }): Msg[] {
  return Array.from({ length: n }, (_, i) => ({
    role: i % 2 ? 'assistant' : 'user',
    content: edit?.at === i ? edit.text : `message ${i} of the conversation`,
  }));
}

function prefixOf(messages: Msg[], system = 'You are a coding agent.'): Prefix {
  const body = JSON.stringify({ model: 'claude-opus-5', max_tokens: 8, system, messages });
  return new PrefixBuilder().parse(body, { format: 'anthropic-messages' });
}

/** Requests of two conversations: growing turns, a retry, an edit deep in the history, a stranger. */
function script(): Array<{ id: string; prefix: Prefix; time: number }> {
  const bodies = [
    history(1_201),
    history(1_203),
    history(1_203),
    history(1_205, { at: 900, text: 'an edited message' }),
    history(601, { at: 0, text: 'another task' }),
    history(1_207),
    history(603, { at: 0, text: 'another task' }),
  ];
  return bodies.map((m, i) => ({ id: `r${i + 1}`, prefix: prefixOf(m), time: (i + 1) * 1000 }));
}

const headers = new Headers();
const label = (t: { resolution: object }) => t.resolution;

describe('stepped conversation commits', () => {
  it('trackSteps gives the same resolutions and store as resolve then commit, even driven interleaved', () => {
    const requests = script();
    const whole = new ConversationTracker();
    const expected = requests.map((r) => {
      const t = whole.resolve(r.id, r.prefix, headers, r.time);
      whole.commit(t, ROUTE, 200);
      return label(t);
    });
    // One after another.
    const stepped = new ConversationTracker();
    const got = requests.map((r) =>
      label(
        drainSteps(
          stepped.trackSteps({
            id: r.id,
            prefix: r.prefix,
            headers,
            time: r.time,
            route: ROUTE,
            status: 200,
          }),
        ),
      ),
    );
    expect(got).toEqual(expected);
    expect(stepped.store.snapshot()).toEqual(whole.store.snapshot());
    expect(stepped.store.sizes()).toEqual(whole.store.sizes());
    // All started at once and driven a step each in turn, as the after-response slices do: the line keeps
    // them in order, so each resolution still sees every commit before it whole.
    const interleaved = new ConversationTracker();
    const runs = requests.map((r) =>
      interleaved.trackSteps({
        id: r.id,
        prefix: r.prefix,
        headers,
        time: r.time,
        route: ROUTE,
        status: 200,
      }),
    );
    const results: unknown[] = new Array(runs.length);
    let open = runs.length;
    while (open)
      runs.forEach((g, i) => {
        if (results[i] !== undefined) return;
        const r = g.next();
        if (r.done) {
          results[i] = label(r.value);
          open--;
        }
      });
    expect(results).toEqual(expected);
    expect(interleaved.store.snapshot()).toEqual(whole.store.snapshot());
    // resolveSteps: the resolution resolve gives (last: a lookup reorders what is least recently used).
    const probe = prefixOf(history(1_209));
    expect(label(drainSteps(stepped.resolveSteps('q', probe, headers, 9000)))).toEqual(
      label(whole.resolve('q', probe, headers, 9000)),
    );
  });

  it('does a bounded amount of store work per step, however long the history', () => {
    let calls = 0;
    const counting = new (class extends MemoryConversationStore {
      override addPassing(...a: Parameters<MemoryConversationStore['addPassing']>) {
        calls++;
        super.addPassing(...a);
      }
      override endingAt(...a: Parameters<MemoryConversationStore['endingAt']>) {
        calls++;
        return super.endingAt(...a);
      }
      override passingThrough(...a: Parameters<MemoryConversationStore['passingThrough']>) {
        calls++;
        return super.passingThrough(...a);
      }
    })();
    const tracker = new ConversationTracker(counting);
    const prefix = prefixOf(history(20_001));
    const steps = tracker.trackSteps({ id: 'big', prefix, headers, time: 1000, route: ROUTE, status: 200 });
    let most = 0;
    let count = 0;
    for (;;) {
      calls = 0;
      const r = steps.next();
      most = Math.max(most, calls);
      count++;
      if (r.done) break;
    }
    // 20,000 ends looked up and 20,000 passing keys written, STEP_ITEMS at a time (in one step before).
    expect(most).toBeLessThanOrEqual(2 * STEP_ITEMS);
    expect(count).toBeGreaterThan((2 * 20_000) / STEP_ITEMS);
    // The passing keys, its ending key and the key of its last message (what a carried reply follows).
    expect(counting.sizes().keys).toBe(20_002);
  });

  it('a resolution between two steps of a commit sees the new tip and the passing keys of its first messages', () => {
    const tracker = new ConversationTracker();
    const first = prefixOf(history(3_001));
    const t1 = tracker.resolve('r1', first, headers, 1000);
    const commit = tracker.commitSteps(t1, ROUTE, 200);
    commit.next();
    commit.next();
    expect(tracker.committing).toBe(true);
    // The next turn finds the half-committed request as its parent, by its last message's key.
    const next = tracker.resolve('r2', prefixOf(history(3_003)), headers, 2000);
    expect(next.resolution).toMatchObject({ relation: 'continues', parent: 'r1', conversation: 'c-r1' });
    // The passing keys written so far are those of the first messages, in order.
    const ends = messageEnds(first);
    const indexed = ends.map((e) => tracker.store.passingThrough(e.transcript) !== undefined);
    const written = indexed.indexOf(false);
    expect(written).toBeGreaterThan(0);
    expect(written).toBeLessThan(ends.length - 1);
    expect(indexed.slice(written, -1).every((x) => !x)).toBe(true);
    // The one-step commit of another request finishes the half-done one first: commits apply in order.
    const other = tracker.resolve('r3', prefixOf(history(11, { at: 0, text: 'elsewhere' })), headers, 3000);
    expect(tracker.commit(other, ROUTE, 200)).toBe(true);
    expect(tracker.committing).toBe(false);
    expect(ends.slice(0, -1).every((e) => tracker.store.passingThrough(e.transcript)?.request === 'r1')).toBe(
      true,
    );
    expect(drainSteps(commit)).toBe(true);
    expect(t1.committed).toBe(true);
    expect(drainSteps(tracker.commitSteps(t1, ROUTE, 200))).toBe(false);
  });
});
