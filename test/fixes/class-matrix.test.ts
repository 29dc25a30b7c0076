import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PriceTable } from '../../src/analyze/price-table.js';
import { VirtualClock } from '../../src/core/clock.js';
import { fixRegistry } from '../../src/fixes/registry.js';
import { createProxy } from '../../src/proxy/create-proxy.js';
import { replayCaptures } from '../../src/replay/replay-captures.js';
import { analyzePaths } from '../../src/report/analyze-paths.js';
import { agentConversation, anthropicTool, appendUserTurn } from '../../src/sim/agent-conversation.js';
import { createSimulator } from '../../src/sim/simulator.js';
import { cli } from '../cli/run-cli.js';

type Json = Record<string, unknown>;
type Msg = { role: string; content: Json[] | string };
const TOOLS = ['Bash', 'Glob', 'Grep', 'Read', 'Edit', 'Write', 'TodoWrite', 'memory'];
const REMINDER = { type: 'text', text: '<system-reminder>\nThe user opened src/app.ts.\n</system-reminder>' };

/** Five turns of one session; `mutate` changes turn 3 onward the way the class does. */
function session(mutate: (body: Json, turn: number) => Json, setup: (body: Json) => Json = (b) => b): Json[] {
  let conv = setup(agentConversation({ turns: 4, tools: TOOLS, seed: 31 }));
  const out: Json[] = [];
  for (let turn = 1; turn <= 5; turn++) {
    out.push(turn >= 3 ? mutate(structuredClone(conv), turn) : conv);
    conv = appendUserTurn(conv, `turn ${turn + 1}`);
  }
  return out;
}

const withReminder = (b: Json) => {
  const msgs = b.messages as Msg[];
  (msgs[4]!.content as Json[]).push({ ...REMINDER });
  return b;
};
const withOwnReminder = (b: Json) => {
  (b.messages as Msg[]).splice(5, 0, { role: 'user', content: [{ ...REMINDER }] });
  return b;
};

const CLASSES: Array<{ name: string; fix: string; cause: string; bodies: Json[] }> = [
  {
    name: 'tool added',
    fix: 'tools-freeze',
    cause: 'tools_changed',
    bodies: session((b) => ({
      ...b,
      tools: [
        ...(b.tools as Json[]).slice(0, 4),
        anthropicTool('mcp__db__query'),
        ...(b.tools as Json[]).slice(4),
      ],
    })),
  },
  {
    name: 'tool removed',
    fix: 'tools-freeze',
    cause: 'tools_changed',
    bodies: session((b) => ({ ...b, tools: (b.tools as Json[]).filter((t) => t.name !== 'Grep') })),
  },
  {
    name: 'tools reordered',
    fix: 'tools-sort',
    cause: 'tools_changed',
    bodies: session((b, turn) => ({
      ...b,
      tools:
        turn % 2
          ? [...(b.tools as Json[])].reverse()
          : [...(b.tools as Json[]).slice(4), ...(b.tools as Json[]).slice(0, 4)],
    })),
  },
  {
    name: 'reminder re-serialized (merged into its neighbour)',
    fix: 'pin-reminders',
    cause: 'messages_edited',
    bodies: session((b) => {
      const msgs = b.messages as Msg[];
      const own = msgs.splice(5, 1)[0] as Msg;
      (msgs[4]!.content as Json[]).push(...(own.content as Json[]));
      return b;
    }, withOwnReminder),
  },
  {
    name: 'reminder moved into its own message',
    fix: 'pin-reminders',
    cause: 'messages_edited',
    bodies: session((b) => {
      const msgs = b.messages as Msg[];
      const moved = (msgs[4]!.content as Json[]).pop() as Json;
      msgs.splice(5, 0, { role: 'user', content: [moved] });
      return b;
    }, withReminder),
  },
];

async function run(bodies: Json[], fix?: string) {
  const clock = new VirtualClock();
  const sim = createSimulator({ clock });
  const simUrl = await sim.listen();
  const dir = mkdtempSync(join(tmpdir(), 'cacheward-matrix-'));
  const proxy = createProxy({
    upstream: simUrl,
    dir,
    clock,
    capture: 'full',
    ...(fix ? { fixes: [fix] } : {}),
    logger: {},
  });
  await proxy.listen();
  try {
    for (const body of bodies) {
      clock.advance(30_000);
      const res = await fetch(`${proxy.url}/v1/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': 'k', 'x-cacheward-session': 's1' },
        body: JSON.stringify(body),
      });
      const text = await res.text();
      expect(res.status, text).toBe(200);
    }
    await proxy.flush();
  } finally {
    await proxy.close();
    await sim.close();
  }
  const analysis = await analyzePaths([dir], { prices: new PriceTable() });
  return { dir, analysis, rewritten: analysis.misses.reduce((t, m) => t + m.rewrittenTokens, 0) };
}

describe.each(CLASSES)('bust class: $name', ({ fix, cause, bodies }) => {
  it(`is named ${cause} without the fix, and ${fix} removes at least 99% of its re-written tokens`, async () => {
    const without = await run(bodies);
    expect(without.analysis.misses.map((m) => m.cause)).toContain(cause);
    expect(without.rewritten).toBeGreaterThan(1000);
    const withFix = await run(bodies, fix);
    expect(withFix.rewritten).toBeLessThanOrEqual(without.rewritten * 0.01);
    // The gate passes on what the proxy captured with the fix on, and on the raw traffic too.
    const gate = await cli(['replay', withFix.dir, '--fix', fix, '--gate']);
    expect(gate.stdout).toContain('all hold');
    expect(gate.code).toBe(0);
    const replay = await replayCaptures([without.dir], { fixes: fixRegistry().resolve([fix]) });
    expect(replay.violations).toEqual([]);
    expect(replay.totals.withFixes).toBeLessThanOrEqual(replay.totals.withoutFixes * 0.01);
    const restarted = await replayCaptures([without.dir], {
      fixes: fixRegistry().resolve([fix]),
      restartAt: 4,
    });
    expect(restarted.totals.withFixes).toBe(replay.totals.withFixes);
  }, 60_000);
});
