import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { VirtualClock } from '../../src/core/clock.js';
import type { Fix } from '../../src/fixes/fix.js';
import { fixRegistry } from '../../src/fixes/registry.js';
import { createProxy } from '../../src/proxy/create-proxy.js';
import { type Invariant, replayCaptures } from '../../src/replay/replay-captures.js';
import { agentConversation, appendUserTurn } from '../../src/sim/agent-conversation.js';
import { createSimulator } from '../../src/sim/simulator.js';

type Json = Record<string, unknown>;

async function capture(
  bodies: Json[],
  headers: Record<string, string> = {},
  fixes: string[] = [],
): Promise<string> {
  const clock = new VirtualClock();
  const sim = createSimulator({ clock });
  const simUrl = await sim.listen();
  const dir = mkdtempSync(join(tmpdir(), 'cacheward-inv-'));
  const proxy = createProxy({ upstream: simUrl, dir, clock, capture: 'full', fixes, logger: {} });
  await proxy.listen();
  try {
    for (const body of bodies) {
      clock.advance(10_000);
      const res = await fetch(`${proxy.url}/v1/messages`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'x-api-key': 'k',
          'x-cacheward-session': 'inv',
          ...headers,
        },
        body: JSON.stringify(body),
      });
      expect(res.status, await res.text()).toBe(200);
    }
    await proxy.flush();
  } finally {
    await proxy.close();
    await sim.close();
  }
  return dir;
}

/** A broken fix built from a body transformation. */
function broken(name: string, apply: Fix<null>['apply']): Fix<null> {
  return { name, description: 'deliberately broken', initialState: () => null, apply };
}
const read = (b: Buffer) => JSON.parse(b.toString()) as Json;
/** The whole body replaced: the patch a careless fix would declare. */
const write = (body: Buffer, v: Json) => [{ start: 0, end: body.length, text: JSON.stringify(v) }];

const BROKEN: Array<[Invariant, Fix<null>]> = [
  [
    'stability',
    broken('clock-in-system', (req, state, ctx) => {
      const v = read(req.body);
      v.system = [{ type: 'text', text: `Now: ${ctx.now}` }, ...((v.system as Json[]) ?? [])];
      return { patches: write(req.body, v), state, notes: ['stamped the time'] };
    }),
  ],
  [
    'safety',
    broken('extra-user-turn', (req, state) => {
      const v = read(req.body);
      (v.messages as Json[]).splice(1, 0, { role: 'user', content: 'injected' });
      return { patches: write(req.body, v), state, notes: [] };
    }),
  ],
  [
    'conservation',
    broken('drops-a-block', (req, state) => {
      const v = read(req.body);
      const first = (v.messages as Array<{ content: Json[] | string }>)[0];
      if (first) first.content = 'replaced';
      return { patches: write(req.body, v), state, notes: [], changes: [{ kind: 'restructure' }] };
    }),
  ],
  [
    'fidelity',
    broken('mutates-in-place', (req, state) => {
      const at = req.body.indexOf('"max_tokens"');
      if (at >= 0) req.body[at + 1] = 'M'.charCodeAt(0);
      return { state, notes: [] };
    }),
  ],
];

let dir: string;
beforeAll(async () => {
  let conv = agentConversation({ turns: 3, seed: 41 });
  const bodies: Json[] = [];
  for (let i = 0; i < 4; i++) {
    bodies.push(conv);
    conv = appendUserTurn(conv, `next ${i}`);
  }
  dir = await capture(bodies);
});

describe('each replay invariant turns red on a fix that breaks it', () => {
  it.each(BROKEN)('%s', async (invariant, fix) => {
    const result = await replayCaptures([dir], { fixes: [fix] });
    expect(result.violations.map((v) => v.invariant)).toContain(invariant);
    const v = result.violations.find((x) => x.invariant === invariant);
    expect(v?.requestId).toMatch(/^cw_/);
    expect(v?.position).toBeGreaterThan(0);
  });

  it('stays green for the built-in fixes on ordinary traffic', async () => {
    const result = await replayCaptures([dir], {
      fixes: fixRegistry().resolve(['tools-freeze', 'tools-sort', 'pin-reminders', 'ttl']),
    });
    expect(result.violations).toEqual([]);
  });
});

describe('a Claude Code-shaped session through every fix', () => {
  it('passes unharmed: the simulator accepts each request and the gate holds', async () => {
    let conv = agentConversation({ turns: 3, seed: 43 }) as Json;
    conv.tools = [
      ...(conv.tools as Json[]),
      {
        name: 'mcp__ide__getDiagnostics',
        description: 'deferred',
        input_schema: { type: 'object' },
        defer_loading: true,
      },
    ];
    conv.metadata = { user_id: 'user_1_account_2_session_3a4b' };
    const msgs = conv.messages as Json[];
    msgs.splice(3, 0, {
      role: 'system',
      content: [{ type: 'text', text: 'Auto mode is on.', cache_control: { type: 'ephemeral' } }],
    });
    const bodies: Json[] = [];
    for (let i = 0; i < 4; i++) {
      bodies.push(conv);
      conv = appendUserTurn(conv, `step ${i}`);
      // Claude Code re-sends the same system message as a plain string on later turns.
      ((conv.messages as Json[])[3] as Json).content = 'Auto mode is on.';
    }
    const headers = {
      'anthropic-beta': 'claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27',
      'x-claude-code-session-id': 'cc-sess-1',
    };
    const fixes = ['tools-freeze', 'tools-sort', 'pin-reminders', 'ttl'];
    const withFixes = await capture(bodies, headers, fixes);
    const result = await replayCaptures([withFixes], { fixes: fixRegistry().resolve(fixes) });
    expect(result.violations).toEqual([]);
    expect(result.requests).toBe(4);
  });
});
