import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { TTL_1H } from '../../src/cache/anthropic-rules.js';
import { OPENAI_TTL_24H } from '../../src/cache/openai-cache.js';
import { LruMap } from '../../src/core/lru-map.js';
import { PrefixBuilder } from '../../src/prefix/build-prefix.js';
import { agentConversation, appendUserTurn } from '../../src/sim/agent-conversation.js';
import { FixStateStore } from '../../src/state/fix-state-store.js';
import { MemoryProxyState } from '../../src/state/memory-proxy-state.js';

const T0 = Date.UTC(2026, 11, 1);
const builder = new PrefixBuilder();
const prefixOf = (body: unknown, format: 'anthropic-messages' | 'openai-chat' = 'anthropic-messages') =>
  builder.parse(JSON.stringify(body), { format });

/** Sends one turn of conversation `c` through the state and commits it; returns its resolution. */
async function turn(
  state: MemoryProxyState,
  id: string,
  body: unknown,
  time: number,
  route = '/v1/messages',
) {
  const p = await state.prepare(
    id,
    prefixOf(body, route === '/v1/messages' ? 'anthropic-messages' : 'openai-chat'),
    {},
    time,
  );
  if (!p.ok) throw new Error(p.detail);
  await state.commit(p, route, 200, {
    states: new Map([['tools-freeze', { frozen: (body as { tools?: unknown[] }).tools ?? [], n: id }]]),
    pair: { client: [], forwarded: [] },
  });
  return p.tracked.resolution;
}

describe('LruMap ages entries out', () => {
  it('drops entries whose expiry passed, oldest first, and keeps the rest in order', () => {
    const m = new LruMap<number>(10);
    m.set('a', 1, 100);
    m.set('b', 2, 200);
    m.set('c', 3);
    m.set('d', 4, 50);
    expect(m.prune(150)).toBe(2);
    expect([...m.entries()]).toEqual([
      ['b', 2],
      ['c', 3],
    ]);
    m.set('b', 2);
    expect(m.prune(10_000)).toBe(0);
  });
});

describe('LruMap tells what it drops by itself', () => {
  it('hears of entries pushed out or expired, not of explicit deletes', () => {
    const dropped: string[] = [];
    const m = new LruMap<number>(2, (k, v) => dropped.push(`${k}=${v}`));
    m.set('a', 1, 100);
    m.set('b', 2);
    m.set('c', 3, 50);
    m.delete('b');
    m.set('d', 4);
    expect(m.prune(60)).toBe(1);
    expect(dropped).toEqual(['a=1', 'c=3']);
    expect(m.peek('d')).toBe(4);
  });
});

describe('the proxy state is bounded', () => {
  it('remembers at most maxConversations conversations however many pass', async () => {
    const state = new MemoryProxyState({ maxConversations: 50 });
    for (let c = 0; c < 400; c++)
      await turn(state, `r${c}`, agentConversation({ turns: 1, seed: c + 1 }), T0 + c * 1000);
    const sizes = state.local.store.sizes();
    expect(sizes.conversations).toBe(50);
    expect(sizes.requests).toBeLessThanOrEqual(200);
    expect(sizes.keys).toBeLessThanOrEqual(2 * 800);
  });

  it('forgets a conversation whole: its requests, index keys, response ids and fix state go with it', async () => {
    // What one conversation of three turns holds, alone.
    const one = new MemoryProxyState({ maxConversations: 20 });
    const threeTurns = async (state: MemoryProxyState, c: number) => {
      let body = agentConversation({ turns: 1, seed: c + 1 });
      for (let t = 0; t < 3; t++) {
        const id = `r${c}-${t}`;
        await turn(state, id, body, T0 + c * 1000 + t);
        state.local.store.addResponse(`msg_${id}`, id);
        body = appendUserTurn(body, `turn ${t} of ${c}: go on`);
      }
    };
    await threeTurns(one, 0);
    const each = one.sizes();
    expect(each.requests).toBe(3);
    // 120 conversations through a state that holds 20: what is held is 20 conversations' worth, not the
    // indexes' own caps (80 requests, 320 keys) filled with what forgotten conversations left behind.
    const state = new MemoryProxyState({ maxConversations: 20 });
    for (let c = 0; c < 120; c++) await threeTurns(state, c);
    const sizes = state.sizes();
    expect(sizes.conversations).toBe(20);
    expect(sizes.requests).toBe(20 * each.requests);
    expect(sizes.keys).toBeLessThanOrEqual(20 * each.keys);
    expect(sizes.responses).toBe(20 * each.responses);
    expect(sizes.fixStates).toBeLessThanOrEqual(20 * each.fixStates);
    // The latest conversations still continue, with their fix state.
    const last = appendUserTurn(
      appendUserTurn(
        appendUserTurn(agentConversation({ turns: 1, seed: 120 }), 'turn 0 of 119: go on'),
        'turn 1 of 119: go on',
      ),
      'turn 2 of 119: go on',
    );
    const p = await state.prepare('next', prefixOf(last), {}, T0 + 500_000);
    expect(p.ok && p.tracked.resolution.relation).toBe('continues');
    expect(p.ok && p.states?.get('tools-freeze')).toBeTruthy();
  });

  it('forgets an Anthropic conversation after 1 h (its cache cannot hold it longer), not before', async () => {
    const state = new MemoryProxyState();
    const first = agentConversation({ turns: 1, seed: 7 });
    await turn(state, 'a1', first, T0);
    const next = appendUserTurn(first, 'go on');
    // 59 minutes later it continues, with its fix state.
    const soon = await state.prepare('a2', prefixOf(next), {}, T0 + TTL_1H - 60_000);
    expect(soon.ok && soon.tracked.resolution.relation).toBe('continues');
    expect(soon.ok && soon.states?.get('tools-freeze')).toBeTruthy();
    // Other traffic after the TTL prunes it: the same request is then a new conversation, fresh state.
    for (let c = 0; c < 64; c++)
      await turn(state, `o${c}`, agentConversation({ turns: 1, seed: 100 + c }), T0 + TTL_1H + 1000 + c);
    const late = await state.prepare('a3', prefixOf(next), {}, T0 + TTL_1H + 120_000);
    expect(late.ok && late.tracked.resolution.relation).toBe('new');
    expect(late.ok && late.states).toBeUndefined();
  });

  it('keeps an OpenAI conversation for its 24 h retention', async () => {
    const state = new MemoryProxyState();
    const body = {
      model: 'gpt-5',
      messages: [
        { role: 'system', content: 'You are a careful coding agent. '.repeat(60) },
        { role: 'user', content: 'Fix the test.' },
      ],
    };
    await turn(state, 'o1', body, T0, '/v1/chat/completions');
    for (let c = 0; c < 64; c++)
      await turn(state, `x${c}`, agentConversation({ turns: 1, seed: 300 + c }), T0 + 2 * TTL_1H + c);
    const next = {
      ...body,
      messages: [
        ...body.messages,
        { role: 'assistant', content: 'Done.' },
        { role: 'user', content: 'Thanks.' },
      ],
    };
    const later = await state.prepare('o2', prefixOf(next, 'openai-chat'), {}, T0 + OPENAI_TTL_24H - 60_000);
    expect(later.ok && later.tracked.resolution.relation).toBe('continues');
  });

  it('holds one copy of equal fix-state parts across conversations', () => {
    const store = new FixStateStore();
    const tools = () => agentConversation({ turns: 0 }).tools as object[];
    store.set('r1', new Map([['tools-freeze', { frozen: tools() }]]));
    store.set('r2', new Map([['tools-freeze', { frozen: tools() }]]));
    const a = store.get('r1')?.get('tools-freeze') as { frozen: object[] };
    const b = store.get('r2')?.get('tools-freeze') as { frozen: object[] };
    expect(a.frozen).toEqual(b.frozen);
    expect(a.frozen[0]).toBe(b.frozen[0]);
  });
});

describe('the state file', () => {
  it('stores each distinct fix state once, reloads it, and removes temp files of dead processes', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cacheward-bounded-state-'));
    // A temp file a killed writer left (pid 2^22 + 1 is above Linux's pid_max) and one of this process.
    writeFileSync(join(dir, 'conversations.json.4194305.abcd.tmp'), '{');
    writeFileSync(join(dir, `conversations.json.${process.pid}.beef.tmp`), '{');
    const state = new MemoryProxyState({ stateDir: dir });
    for (let c = 0; c < 20; c++)
      await turn(state, `r${c}`, agentConversation({ turns: 1, seed: c + 1 }), T0 + c);
    await state.close();
    expect(readdirSync(dir).sort()).toEqual([
      'conversations.json',
      `conversations.json.${process.pid}.beef.tmp`,
    ]);
    const doc = JSON.parse(readFileSync(join(dir, 'conversations.json'), 'utf8'));
    expect(doc.version).toBe(2);
    expect(doc.fixStates).toHaveLength(20);
    // 20 states differ only in `n`; the tools in each are the same objects' JSON, stored per part.
    expect(Object.keys(doc.parts)).toHaveLength(20);
    const again = new MemoryProxyState({ stateDir: dir });
    const next = appendUserTurn(agentConversation({ turns: 1, seed: 3 }), 'go on');
    const p = await again.prepare('r3b', prefixOf(next), {}, T0 + 60_000);
    expect(p.ok && p.tracked.resolution.relation).toBe('continues');
    const restored = p.ok ? (p.states?.get('tools-freeze') as { n: string } | undefined) : undefined;
    expect(restored?.n).toBe('r2');
  });
});

describe('one retention for memory, the state file and Redis', () => {
  it('a restart keeps each conversation as long as its cache could, no longer', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cacheward-retention-'));
    const state = new MemoryProxyState({ stateDir: dir });
    const first = agentConversation({ turns: 1, seed: 41 });
    await turn(state, 'k1', first, T0);
    const chat = {
      model: 'gpt-5',
      messages: [
        { role: 'system', content: 'You are a careful coding agent. '.repeat(60) },
        { role: 'user', content: 'Fix the test.' },
      ],
    };
    await turn(state, 'k2', chat, T0, '/v1/chat/completions');
    await state.close();
    const doc = JSON.parse(readFileSync(join(dir, 'conversations.json'), 'utf8'));
    expect(Object.fromEntries(doc.expires)).toEqual({ k1: T0 + TTL_1H, k2: T0 + OPENAI_TTL_24H });
    const again = new MemoryProxyState({ stateDir: dir });
    // Traffic two hours later prunes what expired: the Anthropic conversation (1 h), not the OpenAI one (24 h).
    for (let c = 0; c < 64; c++)
      await turn(again, `z${c}`, agentConversation({ turns: 1, seed: 500 + c }), T0 + 2 * TTL_1H + c);
    const late = await again.prepare(
      'k1b',
      prefixOf(appendUserTurn(first, 'go on')),
      {},
      T0 + 2 * TTL_1H + 100,
    );
    expect(late.ok && late.tracked.resolution.relation).toBe('new');
    expect(late.ok && late.states).toBeUndefined();
    const chatNext = {
      ...chat,
      messages: [
        ...chat.messages,
        { role: 'assistant', content: 'Done.' },
        { role: 'user', content: 'Thanks.' },
      ],
    };
    const kept = await again.prepare('k2b', prefixOf(chatNext, 'openai-chat'), {}, T0 + 2 * TTL_1H + 100);
    expect(kept.ok && kept.tracked.resolution).toMatchObject({ relation: 'continues', parent: 'k2' });
    expect(kept.ok && kept.states?.get('tools-freeze')).toBeTruthy();
  });
});

describe('the state file snapshot', () => {
  it('yields between conversations while it writes their fix states, and reloads every one', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cacheward-sliced-snapshot-'));
    const state = new MemoryProxyState({ stateDir: dir, snapshotSliceMs: 0 });
    // Each state notes, when it is written, how many turns of the event loop other work has had.
    let ticks = 0;
    const seen: number[] = [];
    const n = 30;
    for (let c = 0; c < n; c++) {
      const id = `s${c}`;
      const p = await state.prepare(id, prefixOf(agentConversation({ turns: 1, seed: 100 + c })), {}, T0 + c);
      if (!p.ok) throw new Error(p.detail);
      const fixState = {
        n: id,
        toJSON() {
          seen.push(ticks);
          return { n: id };
        },
      };
      await state.commit(p, '/v1/messages', 200, {
        states: new Map([['tools-freeze', fixState]]),
        pair: { client: [], forwarded: [] },
      });
    }
    let running = true;
    const tick = () => {
      ticks++;
      if (running) setImmediate(tick);
    };
    setImmediate(tick);
    await state.close();
    running = false;
    // The last write (on close) wrote every state; composed in one go, they would all have seen one count.
    expect(seen.length).toBeGreaterThanOrEqual(n);
    expect(new Set(seen.slice(-n)).size).toBeGreaterThanOrEqual(n - 1);
    const doc = JSON.parse(readFileSync(join(dir, 'conversations.json'), 'utf8'));
    expect(doc.fixStates).toHaveLength(n);
    const again = new MemoryProxyState({ stateDir: dir });
    const next = appendUserTurn(agentConversation({ turns: 1, seed: 100 + 21 }), 'go on');
    const p = await again.prepare('s21b', prefixOf(next), {}, T0 + 60_000);
    expect(p.ok && (p.states?.get('tools-freeze') as { n: string } | undefined)?.n).toBe('s21');
  });
});
