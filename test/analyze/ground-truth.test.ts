// The ground-truth corpus: hundreds of generated sessions, each with one known event (or none), sent with
// the official SDKs through two real capturing proxies into the simulator; the report must name the cause.
// CACHEWARD_CORPUS_REPORT=1 prints the per-event table even when everything passes.
import { rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateCorpus, SCHEMES } from './corpus/corpus.js';
import { EVENTS } from './corpus/events.js';
import {
  accuracyTable,
  type CorpusScore,
  type Outcome,
  scoreCorpus,
  summary,
} from './corpus/score-corpus.js';
import { type CorpusRun, sendCorpus } from './corpus/send-corpus.js';

let run: CorpusRun;
let score: CorpusScore;
let report: string;

beforeAll(async () => {
  run = await sendCorpus(generateCorpus());
  score = await scoreCorpus(run);
  report = summary(score);
  if (process.env.CACHEWARD_CORPUS_REPORT)
    console.log(`${report}\n\nper event:\n${accuracyTable(score)}\n\nsent in ${run.seconds.toFixed(1)} s`);
}, 240_000);

afterAll(() => {
  if (run) rmSync(run.root, { recursive: true, force: true });
});

const injected = (event: string, scheme?: string) =>
  score.outcomes.filter(
    (o) => o.sent.plan.injected && o.sent.plan.event === event && (!scheme || o.sent.plan.scheme === scheme),
  );
const describeRows = (list: Outcome[]) =>
  list.map(
    (o) => `${o.sent.plan.session}: ${o.row?.relation} ${o.got} ${JSON.stringify(o.row?.miss?.detail)}`,
  );

describe('the ground-truth corpus', () => {
  it('is large enough for the floors to mean something, on every scheme, format and capture mode', () => {
    expect(score.requests).toBeGreaterThan(2_000);
    expect(score.injected.total).toBeGreaterThan(300);
    // Every request the SDKs sent has its row in the report.
    expect(score.outcomes.filter((o) => !o.row).map((o) => o.sent.plan.session)).toEqual([]);
    const seen = new Set(score.outcomes.map((o) => `${o.sent.plan.scheme}/${o.sent.plan.format}`));
    for (const s of SCHEMES)
      expect(
        [...seen].some((k) => k.startsWith(`${s}/`)),
        s,
      ).toBe(true);
    for (const f of ['anthropic', 'chat', 'responses'])
      expect(
        [...seen].some((k) => k.endsWith(`/${f}`)),
        f,
      ).toBe(true);
    const events = new Set(score.outcomes.filter((o) => o.sent.plan.injected).map((o) => o.sent.plan.event));
    for (const e of EVENTS) expect(events.has(e.name), e.name).toBe(true);
    for (const mode of ['hashes', 'full'] as const)
      expect(score.outcomes.filter((o) => o.sent.capture === mode && o.row).length).toBeGreaterThan(500);
  });

  it('names the cause a user expects (one strict name, no alternates) for at least 99% of the injected misses', () => {
    expect(score.injected.right / score.injected.total, report).toBeGreaterThanOrEqual(0.99);
  });

  it('raises at most 1 false miss per 1,000 requests (controls, turns around events, costless events)', () => {
    expect(score.falseMisses.length / score.requests, report).toBeLessThanOrEqual(1 / 1_000);
  });

  it('never calls a main-line request a fork, and calls at least 98% of the forks forks', () => {
    expect(score.mainForks.length, report).toBe(0);
    const forks = score.outcomes.filter((o) => o.sent.plan.line === 'fork').length;
    // (A review agent under a label of its own is a session of its own since round 3: fewer forks.)
    expect(forks).toBeGreaterThan(20);
    expect(score.missedForks.length / forks, report).toBeLessThanOrEqual(0.02);
  });
});

describe('the evidence behind the causes', () => {
  it('a mixed-TTL session (1 h system, 5 m conversation) idle 10 minutes expired at the 5-minute TTL', () => {
    const list = injected('ttl_mixed');
    expect(list.length).toBeGreaterThan(0);
    for (const o of list) expect(o.row?.miss?.detail, o.sent.plan.session).toMatchObject({ ttlSeconds: 300 });
  });

  it('GPT-5.6 expires at 30 minutes and is named lookback_exceeded past 20 eligible message ends', () => {
    for (const scheme of ['gpt-5.6-implicit', 'gpt-5.6-explicit'])
      for (const o of injected('ttl_expired', scheme))
        expect(o.row?.miss?.detail, o.sent.plan.session).toMatchObject({ ttlSeconds: 1800 });
    const within = injected('idle_within_ttl', 'gpt-5.6-implicit');
    expect(within.length).toBeGreaterThan(0);
    for (const o of within) expect(o.got, o.sent.plan.session).toBeNull();
    const lookback = injected('many_steps', 'gpt-5.6-implicit');
    for (const o of lookback) expect(o.got, o.sent.plan.session).toBe('lookback_exceeded');
  });

  it('Anthropic lookback gives the distance, below-minimum gives the minimum', () => {
    for (const o of injected('many_steps', 'anthropic'))
      expect(o.row?.miss?.detail.lookbackDistance, o.sent.plan.session).toBeGreaterThan(20);
    for (const o of injected('below_minimum'))
      expect(o.row?.miss?.detail.minimumTokens, o.sent.plan.session).toBe(
        o.sent.plan.scheme === 'anthropic' ? 4096 : 1024,
      );
  });

  it('a subagent under the main line’s label is a sibling written at its own size, never model_changed', () => {
    const subagents = score.outcomes.filter((o) => o.sent.plan.event === 'subagent');
    expect(subagents.filter((o) => o.got === 'model_changed' || o.got === 'fork_diverged')).toEqual([]);
    const first = injected('subagent');
    expect(first.length).toBeGreaterThan(0);
    for (const o of first) {
      expect(o.row?.relation, o.sent.plan.session).toBe('sibling');
      expect(o.got).toBe('cold_start');
      expect(o.row?.usage?.inputTotal).toBe(
        (o.row?.usage?.cacheRead ?? 0) + (o.row?.usage?.cacheWrite ?? 0) + (o.row?.usage?.uncached ?? 0),
      );
    }
  });

  it('strangers that share a system prompt (and an opening context message) are new conversations', () => {
    const list = score.outcomes.filter((o) => o.sent.plan.event === 'unrelated_shared_system');
    expect(describeRows(list.filter((o) => o.got === 'fork_diverged' || o.row?.relation === 'fork'))).toEqual(
      [],
    );
    const firsts = list.filter((o) => o.sent.plan.expect === 'cold_start');
    for (const o of firsts) expect(o.row?.relation, o.sent.plan.session).toBe('new');
  });

  it('without any label, a tool added mid-session continues the conversation as tools_changed', () => {
    for (const o of injected('no_label_tool_added')) {
      expect(o.row?.relation, o.sent.plan.session).toBe('continues');
      expect(o.got).toBe('tools_changed');
    }
  });

  it('previous_response_id chains are read whole: every chained turn continues, none is params_changed', () => {
    const list = score.outcomes.filter((o) => o.sent.plan.event.startsWith('responses_chain'));
    expect(list.filter((o) => o.sent.plan.chain).length).toBeGreaterThan(20);
    for (const o of list)
      expect(o.row?.relation, o.sent.plan.session).toBe(o.sent.plan.chain ? 'continues' : 'new');
    expect(describeRows(list.filter((o) => o.got === 'params_changed'))).toEqual([]);
    for (const o of injected('responses_chain_instructions')) expect(o.got).toBe('system_changed');
  });

  it('a correct summary fork costs nothing, nor does the main line’s next turn', () => {
    const list = score.outcomes.filter((o) => o.sent.plan.event === 'summary_fork');
    expect(list.length).toBeGreaterThan(0);
    expect(describeRows(list.filter((o) => o.sent.plan.expect === null && o.got !== null))).toEqual([]);
  });

  it('one prompt under four labels: four main lines, never forks; the later ones started warm from the first', () => {
    const list = score.outcomes.filter((o) => o.sent.plan.event === 'labels_same_prompt');
    expect(list.length).toBeGreaterThan(100);
    expect(describeRows(list.filter((o) => o.row?.relation === 'fork' || o.got === 'fork_diverged'))).toEqual(
      [],
    );
    const sessions = new Map<string, Outcome[]>();
    for (const o of list)
      sessions.set(o.sent.plan.session, [...(sessions.get(o.sent.plan.session) ?? []), o]);
    for (const [name, runs] of sessions) {
      const [first, ...rest] = runs as [Outcome, ...Outcome[]];
      expect(first.row?.relation, name).toBe('new');
      for (const o of rest) expect(o.row?.relation, name).toBe('continues');
      expect(new Set(runs.map((o) => o.row?.conversation)).size, name).toBe(1);
      // Runs 1 to 3 open with run 0's bytes: where the provider read its cache, they say so.
      if (name.endsWith('#0')) continue;
      const origin = sessions.get(name.replace(/#\d$/, '#0'))?.[0]?.row;
      if (first.row?.usage?.cacheRead)
        expect(first.row?.warmFrom, name).toEqual({ session: origin?.session, request: origin?.id });
      else expect(first.row?.warmFrom, name).toBeUndefined();
    }
    expect(list.filter((o) => o.row?.warmFrom).length).toBeGreaterThan(20);
  });

  it('a one-off system change, a resume on another model, two changes at once: the main line, by first divergence', () => {
    for (const event of [
      'system_timestamp_once',
      'resume_other_model',
      'model_switch_message_inserted',
      'thinking_message_edited',
    ]) {
      const list = score.outcomes.filter((o) => o.sent.plan.event === event);
      expect(list.length, event).toBeGreaterThan(0);
      expect(describeRows(list.filter((o) => o.row?.relation === 'fork'))).toEqual([]);
      for (const o of list.filter((x) => x.sent.plan.injected))
        expect(o.row?.relation, o.sent.plan.session).toBe('continues');
    }
    for (const o of injected('model_switch_message_inserted')) expect(o.got).toBe('model_changed');
    for (const o of injected('thinking_message_edited')) expect(o.got).toBe('params_changed');
    for (const o of injected('system_edited', 'gpt-5.5')) expect(o.got).toBe('system_changed');
  });

  it('a review agent under a label of its own (the parent labelled) is a session of its own, not a fork', () => {
    const list = injected('review_fork_own_label').filter((o) => o.sent.plan.line === 'main');
    expect(list.length).toBeGreaterThan(0);
    for (const o of list) {
      expect(o.row?.relation, o.sent.plan.session).toBe('new');
      expect(o.got).toBe('cold_start');
    }
  });
});
