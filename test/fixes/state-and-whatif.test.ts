import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { VirtualClock } from '../../src/core/clock.js';
import { createProxy } from '../../src/proxy/create-proxy.js';
import { agentConversation, anthropicTool, appendUserTurn } from '../../src/sim/agent-conversation.js';
import { createSimulator } from '../../src/sim/simulator.js';
import { StateFile } from '../../src/state/state-file.js';
import { cli } from '../cli/run-cli.js';

type Json = Record<string, unknown>;

function turns(): Json[] {
  let conv = agentConversation({ turns: 3, seed: 51 });
  const out: Json[] = [];
  for (let t = 1; t <= 5; t++) {
    const body = structuredClone(conv);
    if (t >= 3) body.tools = [...(body.tools as Json[]), anthropicTool('mcp__late')];
    out.push(body);
    conv = appendUserTurn(conv, `t${t}`);
  }
  return out;
}

describe('fix state survives a proxy restart', () => {
  it('keeps the frozen tools and announcements across a restart, so the cache still reads', async () => {
    const clock = new VirtualClock();
    const sim = createSimulator({ clock });
    const simUrl = await sim.listen();
    const dir = mkdtempSync(join(tmpdir(), 'cacheward-restart-'));
    const bodies = turns();
    const usage: Json[] = [];
    const send = async (url: string, body: Json) => {
      clock.advance(10_000);
      const res = await fetch(`${url}/v1/messages`, {
        method: 'POST',
        headers: { 'x-api-key': 'k', 'x-cacheward-session': 'r' },
        body: JSON.stringify(body),
      });
      usage.push(((await res.json()) as { usage: Json }).usage);
    };
    const first = createProxy({ upstream: simUrl, dir, clock, fixes: ['tools-freeze'], logger: {} });
    await first.listen();
    for (const b of bodies.slice(0, 3)) await send(first.url, b);
    await first.close();
    const second = createProxy({
      upstream: simUrl,
      dir,
      clock,
      fixes: ['tools-freeze'],
      logger: {},
    });
    await second.listen();
    for (const b of bodies.slice(3)) await send(second.url, b);
    await second.close();
    await sim.close();
    // After the restart the forwarded prefix is the same: the last turns read nearly everything.
    for (const u of usage.slice(3))
      expect(u.cache_read_input_tokens as number).toBeGreaterThan(
        (u.cache_creation_input_tokens as number) * 10,
      );
    const stateFiles = readdirSync(join(dir, 'state'));
    expect(stateFiles).toEqual(['conversations.json']);
    const doc = JSON.parse(readFileSync(join(dir, 'state', 'conversations.json'), 'utf8'));
    expect(doc.conversations.conversations.map((c: { label?: string }) => c.label)).toEqual(['r']);
  });

  it('never leaves a torn state file when two proxies write one folder at once', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cacheward-state-race-'));
    const a = new StateFile({ dir, intervalMs: 1 });
    const b = new StateFile({ dir, intervalMs: 1 });
    const doc = (writer: string, i: number, pad: number) => () => ({
      version: 1 as const,
      conversations: { version: 1 as const, conversations: [], requests: [] },
      fixStates: [[`${writer}-${i}`, { 'tools-freeze': { writer, i, pad: 'x'.repeat(pad) } }]] as Array<
        [string, Record<string, unknown>]
      >,
    });
    for (let i = 0; i < 50; i++) {
      a.schedule(doc('a', i, 5000));
      b.schedule(doc('b', i, 7000));
      if (i % 10 === 0) await Promise.all([a.flush(), b.flush()]);
    }
    await Promise.all([a.flush(), b.flush()]);
    expect(readdirSync(dir)).toEqual(['conversations.json']);
    const read = new StateFile({ dir }).load();
    expect(read?.fixStates[0]?.[0]).toMatch(/^[ab]-49$/);
  });
});

describe('whatif --fix', () => {
  it('prices the replay with and without the fixes, per session', async () => {
    const clock = new VirtualClock();
    const sim = createSimulator({ clock });
    const simUrl = await sim.listen();
    const dir = mkdtempSync(join(tmpdir(), 'cacheward-whatif-fix-'));
    const p = createProxy({ upstream: simUrl, dir, clock, capture: 'full', logger: {} });
    await p.listen();
    for (const b of turns()) {
      clock.advance(10_000);
      const res = await fetch(`${p.url}/v1/messages`, {
        method: 'POST',
        headers: { 'x-api-key': 'k', 'x-cacheward-session': 'w' },
        body: JSON.stringify(b),
      });
      await res.text();
    }
    await p.flush();
    await p.close();
    await sim.close();
    const r = await cli(['whatif', dir, '--fix', 'tools-freeze', '--json']);
    expect(r.code).toBe(0);
    const j = JSON.parse(r.stdout) as {
      sessions: Array<{
        session: string;
        rewrittenWithout: number;
        rewrittenWith: number;
        wasteWithout: number;
        wasteWith: number;
      }>;
    };
    const w = j.sessions.find((s) => s.session === 'w');
    expect(w?.rewrittenWithout).toBeGreaterThan(1000);
    expect(w?.rewrittenWith).toBeLessThanOrEqual((w?.rewrittenWithout ?? 0) * 0.01);
    expect(w?.wasteWithout).toBeGreaterThan(0);
    expect((await cli(['whatif', dir, '--fix', 'no-such-fix'])).stderr).toMatch(
      /unknown fix "no-such-fix"; known fixes: tools-freeze, tools-sort, pin-reminders, ttl/,
    );
  });
});

describe('under --capture hashes, no message text reaches the disk', () => {
  it('keeps pins as hashes and only the tool definitions it must re-send', async () => {
    const clock = new VirtualClock();
    const sim = createSimulator({ clock });
    const simUrl = await sim.listen();
    const dir = mkdtempSync(join(tmpdir(), 'cacheward-hashes-state-'));
    const proxy = createProxy({
      upstream: simUrl,
      dir,
      clock,
      capture: 'hashes',
      fixes: ['tools-freeze', 'pin-reminders'],
      logger: {},
    });
    await proxy.listen();
    const SECRET = 'zebra-quartz-secret-7731';
    let conv = agentConversation({ turns: 2, seed: 61 });
    (conv.messages as Json[]).push(
      { role: 'assistant', content: [{ type: 'text', text: 'ok' }] },
      { role: 'user', content: [{ type: 'text', text: `the password is ${SECRET}` }] },
    );
    conv.system = [{ type: 'text', text: `system says ${SECRET}` }];
    for (let t = 0; t < 3; t++) {
      clock.advance(5_000);
      const res = await fetch(`${proxy.url}/v1/messages`, {
        method: 'POST',
        headers: { 'x-api-key': 'k' },
        body: JSON.stringify(
          t === 2 ? { ...conv, tools: [...(conv.tools as Json[]), anthropicTool('mcp__x')] } : conv,
        ),
      });
      expect(res.status).toBe(200);
      await res.text();
      conv = appendUserTurn(conv, `turn ${t} ${SECRET}`);
    }
    await proxy.close();
    await sim.close();
    const files: string[] = [];
    const walk = (d: string) => {
      for (const e of readdirSync(d, { withFileTypes: true }))
        e.isDirectory() ? walk(join(d, e.name)) : files.push(join(d, e.name));
    };
    walk(dir);
    const state = files.find((f) => f.endsWith('conversations.json')) as string;
    // The pins are there (as hashes), and so are the frozen tools (they must be re-sent); each fix's state
    // is stored once by its content hash and named by it.
    expect(readFileSync(state, 'utf8')).toMatch(/"pin-reminders":"[0-9a-f]{40}"/);
    expect(readFileSync(state, 'utf8')).toMatch(
      /"[0-9a-f]{40}":\{"messages":\[\{"role":"user","string":false,"ids":\["[0-9a-f]{64}"/,
    );
    // The frozen tools are kept as the client's bytes (a JSON string in the file).
    expect(readFileSync(state, 'utf8')).toContain('"frozen":"[{\\"name\\"');
    for (const f of files) expect(readFileSync(f, 'utf8'), f).not.toContain(SECRET);
  });
});
