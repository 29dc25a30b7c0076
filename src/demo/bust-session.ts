// A scripted agent session that breaks its cache in every way the analyzer names, sent through a real
// proxy into the simulator on one clock. The demo prints its report; the tests assert on it. It never leaves
// loopback and never needs an API key.

import { type AdvanceableClock, OffsetClock } from '../core/clock.js';
import { CachewardError } from '../core/errors.js';
import type { Json } from '../core/json.js';
import { createProxy } from '../proxy/create-proxy.js';
import { agentConversation, anthropicTool, appendUserTurn } from '../sim/agent-conversation.js';
import { createSimulator } from '../sim/simulator.js';

/** One step: what is sent, in which session, and how long the agent idles before it. */
export interface SessionStep {
  label: string;
  /** The cause the analyzer should name for this step (absent: none expected). */
  expect?: string;
  session: string;
  body: Json;
  idleMs?: number;
  /** Sent at the same time as the next step, with a stall so neither response has begun. */
  parallelWithNext?: boolean;
  stallMs?: number;
  /** Another API key: another cache scope at the provider, which the capture cannot see. */
  apiKey?: string;
}

const TOOLS = ['Bash', 'Glob', 'Grep', 'Read', 'Edit', 'Write', 'TodoWrite', 'memory'];

/** The steps, built from one growing conversation. */
export function bustSessionSteps(): SessionStep[] {
  const steps: SessionStep[] = [];
  let conv = agentConversation({ turns: 6, tools: TOOLS, seed: 21 });
  const main = 'main';
  const push = (label: string, body: Json, extra: Partial<SessionStep> = {}) =>
    steps.push({ label, session: main, body, ...extra });
  push('first turn', conv, { expect: 'cold_start' });
  conv = appendUserTurn(conv, 'Now run the tests.');
  push('next turn', conv);
  // A tool is loaded mid-session: tools[] changes.
  conv = appendUserTurn(conv, 'Query the orders table.');
  conv.tools = [
    ...(conv.tools as Json[]).slice(0, 4),
    anthropicTool('mcp__db__query'),
    ...(conv.tools as Json[]).slice(4),
  ];
  push('an MCP tool is added', conv, { expect: 'tools_changed' });
  conv = appendUserTurn(conv, 'Summarize the rows.');
  push('next turn', conv);
  // The user steps away for six minutes: the 5-minute entries expire.
  conv = appendUserTurn(conv, 'I am back; continue.');
  push('after a 6-minute break', conv, { expect: 'ttl_expired', idleMs: 6 * 60_000 });
  // The system prompt carries a timestamp that changed.
  const system = (conv.system as Json[]).map((b) => ({
    ...b,
    text: `${String(b.text)}\nCurrent time: 2026-01-01T00:07:00Z`,
  }));
  conv = { ...appendUserTurn(conv, 'What time is it?'), system };
  push('the system prompt gets a timestamp', conv, { expect: 'system_changed' });
  conv = appendUserTurn(conv, 'Thanks.');
  push('next turn', conv);
  // A background review fork sends a wider tools[] than its parent. Forks go under the parent's session
  // label: under a label of their own they would be sessions of their own, never forks of this one.
  const fork = appendUserTurn(conv, 'Review the conversation and update memory and skills.');
  fork.tools = [...(conv.tools as Json[]), anthropicTool('WebFetch'), anthropicTool('skill_manage')];
  push('a review fork with a wider tools[]', fork, { expect: 'fork_diverged' });
  // A summary done right: a fork that appends its instruction to the parent's exact request.
  push(
    'a summary fork that reuses the parent prefix',
    appendUserTurn(conv, 'Summarize the conversation so far in five bullets.'),
  );
  // A summary done naively: the history re-rendered as one message under another system prompt. The
  // cache sees a new conversation (it shares only the tools): a cold start that writes everything again.
  const transcript = (conv.messages as Json[])
    .map((m) => `${String(m.role)}: ${JSON.stringify(m.content)}`)
    .join('\n');
  steps.push({
    label: 'a standalone summary that re-renders the history',
    session: 'summary-standalone',
    body: {
      model: conv.model,
      max_tokens: 1024,
      tools: conv.tools,
      system: [{ type: 'text', text: 'You summarize agent sessions.', cache_control: { type: 'ephemeral' } }],
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: `Summarize:\n${transcript}`, cache_control: { type: 'ephemeral' } },
          ],
        },
      ],
    },
    expect: 'cold_start',
  });
  conv = appendUserTurn(conv, 'Carry on with the plan.');
  push('the main line goes on', conv);
  // The history is edited in the middle (a reminder dropped from an old message).
  const edited = structuredClone(conv) as Json;
  const msgs = edited.messages as Json[];
  msgs.splice(4, 4);
  conv = appendUserTurn(edited, 'Next step.');
  push('an old turn is dropped from the history', conv, { expect: 'messages_edited' });
  conv = appendUserTurn(conv, 'Go on.');
  push('next turn', conv);
  // A router switches the model.
  conv = { ...appendUserTurn(conv, 'Think about the design.'), model: 'claude-fable-5' };
  push('the model is switched', conv, { expect: 'model_changed' });
  conv = appendUserTurn(conv, 'And the tests?');
  push('next turn', conv);
  // Two requests with the same new prefix at once (a new brief): neither response has begun when the
  // other looks up, so both write it.
  const brief = (conv.system as Json[]).map((b) => ({
    ...b,
    text: `${String(b.text)}\nBrief: ship the fix today.`,
  }));
  conv = { ...appendUserTurn(conv, 'Run both checks.'), system: brief };
  push('two requests with a new brief at once (1)', conv, {
    expect: 'system_changed',
    parallelWithNext: true,
    stallMs: 300,
  });
  push('two requests with a new brief at once (2)', conv, { expect: 'concurrent', stallMs: 300 });
  // The thinking budget changes.
  conv = { ...appendUserTurn(conv, 'Think harder.'), thinking: { type: 'enabled', budget_tokens: 4096 } };
  push('the thinking budget changes', conv, { expect: 'params_changed' });
  conv = appendUserTurn(conv, 'Keep going.');
  push('next turn', conv);
  // A long tool loop appends 22 blocks before the next request: its only moving breakpoint looks back 20.
  for (let i = 0; i < 11; i++) conv = appendUserTurn(conv, `Step ${i + 1} of the batch.`);
  push('22 new blocks in one turn', conv, { expect: 'lookback_exceeded' });
  conv = appendUserTurn(conv, 'Status?');
  push('next turn', conv);
  // The provider misses a prefix it holds (here: the request lands in another workspace).
  conv = appendUserTurn(conv, 'One more.');
  push('the provider does not read a live entry', conv, {
    expect: 'unexplained',
    apiKey: 'another-workspace-key',
  });
  // A small prompt on a model with a large minimum never caches.
  let tiny: Json = {
    model: 'claude-haiku-4-5',
    max_tokens: 256,
    cache_control: { type: 'ephemeral' },
    messages: [{ role: 'user', content: 'Classify: the build is red.' }],
  };
  steps.push({
    label: 'a small prompt on Haiku 4.5',
    session: 'classifier',
    body: tiny,
    expect: 'below_minimum',
  });
  tiny = {
    ...tiny,
    messages: [
      ...(tiny.messages as Json[]),
      { role: 'assistant', content: 'bug' },
      { role: 'user', content: 'And: the docs are stale.' },
    ],
  };
  steps.push({ label: 'its next turn', session: 'classifier', body: tiny, expect: 'below_minimum' });
  return steps;
}

export interface BustSessionResult {
  dir: string;
  steps: SessionStep[];
  /** Capture ids of the steps, in step order. */
  ids: string[];
}

/** Runs the steps through a proxy (capture `hashes`) into a simulator, both on `clock`. */
export async function runBustSession(
  dir: string,
  clock: AdvanceableClock = new OffsetClock(),
  fixes: string[] = [],
): Promise<BustSessionResult> {
  const sim = createSimulator({ clock });
  const simUrl = await sim.listen();
  const proxy = createProxy({ upstream: simUrl, dir, clock, capture: 'hashes', fixes, logger: {} });
  await proxy.listen();
  const steps = bustSessionSteps();
  try {
    const send = async (step: SessionStep) => {
      const res = await fetch(`${proxy.url}/v1/messages`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'x-api-key': step.apiKey ?? 'demo-key',
          'x-cacheward-session': step.session,
          ...(step.stallMs ? { 'x-sim-fault': `stall=${step.stallMs}` } : {}),
        },
        body: JSON.stringify(step.body),
      });
      const text = await res.text();
      if (res.status !== 200)
        throw new CachewardError('CW_DEMO_STEP', `step "${step.label}" got ${res.status}: ${text}`);
    };
    for (let i = 0; i < steps.length; i++) {
      const step = steps[i] as SessionStep;
      if (step.idleMs) clock.advance(step.idleMs);
      else clock.advance(20_000);
      if (step.parallelWithNext && steps[i + 1]) {
        await Promise.all([send(step), send(steps[i + 1] as SessionStep)]);
        i++;
      } else await send(step);
    }
    await proxy.flush();
  } finally {
    await proxy.close();
    await sim.close();
  }
  return { dir, steps, ids: [] };
}
