// Events that test lineage itself: one prompt run under four session labels (CI re-runs), a one-off system
// prompt change the next turn undoes, two changes in one request, and a resume on another model that drops
// the older replies' thinking. Pure and seeded; each names the cause a user expects.

import type { BustCause } from '../../../src/analyze/cause-table.js';
import {
  always,
  anthropic,
  type EventDef,
  linear,
  MIN,
  type SessionSpec,
  SWITCHED,
  session,
  setField,
} from './event-shapes.js';
import { applyLabel, type PlannedRequest, type Session } from './session.js';

/**
 * The same prompt run four times under four `x-cacheward-session` labels, turn by turn side by side (CI
 * runs of one prompt): the second changes its system prompt at turn 3, the third its model, the others
 * nothing. The shared prefix is real (they read each other's cache), the lineage is not: each label is a
 * main line of its own, and its first request started warm from the first label's.
 */
const labelsSamePrompt: EventDef = {
  name: 'labels_same_prompt',
  applies: always,
  build: (spec) => {
    const runs = [0, 1, 2, 3].map((k) => {
      // The same name and seed: the same bytes; only the label differs.
      const s = session(spec, 'labels_same_prompt', { label: 'header' });
      applyLabel(s, 'header', `${spec.name}-run${k}`);
      return s;
    });
    const out: PlannedRequest[] = [];
    for (let t = 1; t <= 5; t++) {
      runs.forEach((s, k) => {
        if (t > 1) s.step();
        let expect: PlannedRequest['expect'] = t === 1 && k === 0 ? 'cold_start' : null;
        if (t === 3 && k === 1) {
          s.conv.system = `${s.conv.system} Run ${k}: ${s.w.sentence(6)}`;
          expect = 'system_changed';
        }
        if (t === 3 && k === 2) {
          s.conv.model = SWITCHED[s.conv.model] ?? s.conv.model;
          expect = 'model_changed';
        }
        const injected = (t === 3 && (k === 1 || k === 2)) || (t === 1 && k > 0);
        s.send({ expect, injected }, { idleMs: 5_000 + s.w.int(5_000) });
        for (const r of s.requests.splice(0)) out.push({ ...r, session: `${r.session}#${k}` });
      });
    }
    return out;
  },
};

/** A timestamp in the system prompt at one turn only; the next turn carries that turn's reply without it. */
const systemTimestampOnce: EventDef = {
  name: 'system_timestamp_once',
  applies: always,
  build: (spec) => {
    const s = session(spec, 'system_timestamp_once');
    // Chat turns: what follows each user message is cached on every scheme (explicit mode caches up to the
    // latest user message only), so the one-off turn's own prefix is what going back re-writes.
    s.kinds.push('chat', 'chat', 'chat', 'chat', 'chat', 'chat');
    const at = 3 + s.w.int(3);
    const plain = s.conv.system;
    s.send({ expect: 'cold_start' });
    for (let t = 2; t <= at + 2; t++) {
      s.step();
      if (t === at) s.conv.system = `${plain}\nCurrent time: 2026-12-0${1 + s.w.int(9)}T1${s.w.int(10)}:00Z`;
      if (t === at + 1) s.conv.system = plain;
      // Back to the prompt of the turns before: what they cached is read again, the one-off turn re-written.
      s.send(t === at || t === at + 1 ? { expect: 'system_changed', injected: true } : { expect: null });
    }
    return s.requests;
  },
};

/**
 * Two changes in one request: the model switched and a message inserted into the history (the model is
 * the first divergence, at the tools level), or the thinking setting changed and a message edited (thinking
 * is a parameter of the messages level, before the edited message).
 */
function twoChanges(name: string, applies: EventDef['applies'], change: (s: Session) => BustCause): EventDef {
  return {
    name,
    applies,
    build: (spec) => {
      const s = session(spec, name);
      s.kinds.push('chat', 'chat', 'chat', 'chat', 'chat');
      const at = 4 + s.w.int(2);
      let expect: BustCause | null = null;
      s.send({ expect: 'cold_start' });
      for (let t = 2; t <= at + 2; t++) {
        s.step();
        if (t === at) expect = change(s);
        s.send(t === at ? { expect, injected: true } : { expect: null });
      }
      return s.requests;
    },
  };
}

const modelAndInsert = twoChanges('model_switch_message_inserted', always, (s) => {
  s.conv.model = SWITCHED[s.conv.model] ?? s.conv.model;
  const it = s.conv.items[s.userItem(1)];
  if (it?.kind === 'user')
    it.parts.unshift({ text: `<system-reminder>${s.w.sentence(8)}</system-reminder>` });
  return 'model_changed';
});

const thinkingAndEdit = twoChanges('thinking_message_edited', anthropic, (s) => {
  setField(s, 'thinking', { type: 'enabled', budget_tokens: 2048 });
  setField(s, 'max_tokens', 4096);
  const it = s.conv.items[s.userItem(1)];
  if (it?.kind === 'user') it.parts = [{ text: `${s.w.sentence(6)} (edited)` }];
  return 'params_changed';
});

/**
 * Claude Code resumed on another model (`--continue --model …`): the whole transcript is resent, but the
 * older replies' thinking blocks are left out and the model changed. It carries the last turn's reply: the
 * main line goes on, `model_changed`, never a fork of an earlier turn.
 */
const resumeOtherModel: EventDef = {
  name: 'resume_other_model',
  applies: anthropic,
  build: (spec: SessionSpec) => {
    const s = session(spec, 'resume_other_model', { style: 'claude-code' });
    s.thinking = true;
    return linear(s, (s) => {
      s.step();
      s.conv.model = SWITCHED[s.conv.model] ?? s.conv.model;
      s.conv.dropThinking = true;
      s.thinking = false;
      return { expect: 'model_changed', idleMs: (2 + s.w.int(3)) * MIN, stepped: true };
    });
  },
};

export const lineageEvents: EventDef[] = [
  labelsSamePrompt,
  systemTimestampOnce,
  modelAndInsert,
  thinkingAndEdit,
  resumeOtherModel,
];
