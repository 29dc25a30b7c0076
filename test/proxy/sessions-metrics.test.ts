import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { describe, expect, it } from 'vitest';
import { readCaptures } from '../../src/capture/capture-reader.js';
import { CaptureWriter } from '../../src/capture/capture-writer.js';
import { VirtualClock } from '../../src/core/clock.js';
import { parsePrefix } from '../../src/prefix/build-prefix.js';
import { wrapFetch } from '../../src/proxy/wrap-fetch.js';
import { capturePrefix } from '../../src/record/capture-record.js';
import { agentConversation, appendUserTurn } from '../../src/sim/agent-conversation.js';
import { createSimulator } from '../../src/sim/simulator.js';
import { bareRecord } from '../fixtures/capture-records.js';
import { EPHEMERAL, messagesBody } from '../sim/helpers.js';
import { API_KEY, startProxy } from './helpers.js';

type Json = Record<string, unknown>;
const h = await startProxy();

async function post(path: string, payload: Json, headers: Record<string, string> = {}) {
  const res = await fetch(`${h.proxy.url}${path}`, {
    method: 'POST',
    headers: {
      'x-api-key': API_KEY,
      authorization: `Bearer ${API_KEY}`,
      'content-type': 'application/json',
      ...headers,
    },
    body: JSON.stringify(payload),
  });
  await res.text();
  return res.status;
}

describe('session keys, in DESIGN.md order', () => {
  it("takes x-cacheward-session, then Claude Code's header, then metadata.user_id, then prompt_cache_key", async () => {
    const b = messagesBody(1, 10);
    await post('/v1/messages', b, { 'x-cacheward-session': 'mine', 'x-claude-code-session-id': 'cc-1' });
    await post('/v1/messages', b, { 'x-claude-code-session-id': 'cc-1' });
    await post('/v1/messages', { ...b, metadata: { user_id: 'user_abc_account_def_session_7f3e-9a' } });
    await post('/v1/chat/completions', {
      model: 'gpt-5.4',
      prompt_cache_key: 'tenant-4',
      messages: [{ role: 'user', content: 'x' }],
    });
    const recs = (await h.records()).slice(-4).map((r) => r.record.session);
    expect(recs).toEqual([
      { key: 'mine', source: 'header' },
      { key: 'cc-1', source: 'claude-code' },
      { key: '7f3e-9a', source: 'metadata' },
      { key: 'pck:tenant-4', source: 'prompt_cache_key' },
    ]);
  });

  it('finds the conversation by its history otherwise: a conversation keeps one session, another gets its own', async () => {
    const a1 = agentConversation({ turns: 2, seed: 11 });
    const a2 = appendUserTurn(a1, 'next');
    const b1 = agentConversation({ turns: 2, seed: 12 });
    await post('/v1/messages', a1);
    await post('/v1/messages', b1);
    await post('/v1/messages', a2);
    const [x, y, z] = (await h.records()).slice(-3).map((r) => r.record.session);
    expect(x?.source).toBe('conversation');
    expect(z?.key).toBe(x?.key);
    expect(y?.key).not.toBe(x?.key);
  });
});

describe('health and metrics', () => {
  it('reports version, upstreams, capture and fixes', async () => {
    const res = await fetch(`${h.proxy.url}/_cacheward/health`);
    expect(res.status).toBe(200);
    const health = (await res.json()) as Json;
    expect(health).toMatchObject({
      status: 'ok',
      upstreams: { anthropic: h.simUrl, openai: h.simUrl },
      fixes: [],
    });
    expect(health.capture).toMatchObject({ mode: 'full', state: 'ok' });
    expect(health.version).toMatch(/^\d+\.\d+\.\d+/);
  });

  it('exposes Prometheus counters with a token-weighted hit ratio', async () => {
    h.sim.reset();
    const b = messagesBody(3, 200, { 2: EPHEMERAL });
    await post('/v1/messages', { ...b, model: 'claude-fable-5' });
    await post('/v1/messages', { ...b, model: 'claude-fable-5' });
    // Counters are updated by the after-response work, which may still be running as the response ends.
    await h.proxy.flush();
    const text = await (await fetch(`${h.proxy.url}/_cacheward/metrics`)).text();
    expect(text).toContain('# TYPE cacheward_requests_total counter');
    expect(text).toMatch(
      /cacheward_requests_total\{provider="anthropic",model="claude-fable-5",status="200"\} 2/,
    );
    const read = Number(
      text.match(
        /cacheward_tokens_total\{provider="anthropic",model="claude-fable-5",kind="read"\} (\d+)/,
      )?.[1],
    );
    const written = Number(
      text.match(
        /cacheward_tokens_total\{provider="anthropic",model="claude-fable-5",kind="written"\} (\d+)/,
      )?.[1],
    );
    const uncached = Number(
      text.match(
        /cacheward_tokens_total\{provider="anthropic",model="claude-fable-5",kind="uncached"\} (\d+)/,
      )?.[1],
    );
    expect(read).toBe(written);
    const ratio = Number(
      text.match(/cacheward_cache_hit_ratio\{provider="anthropic",model="claude-fable-5"\} ([\d.]+)/)?.[1],
    );
    expect(ratio).toBeCloseTo(read / (read + written + uncached), 5);
  });
});

describe('capture modes and limits', () => {
  it('keeps no prompt text in hashes mode', async () => {
    const hashes = await startProxy({ capture: 'hashes' });
    const b = messagesBody(2, 50);
    (b.messages as Array<{ content: Array<{ text: string }> }>)[0]!.content[0]!.text =
      'the-secret-plan-zebra-42 '.repeat(20);
    const client = new Anthropic({ apiKey: API_KEY, baseURL: hashes.proxy.url, maxRetries: 0 });
    await client.messages.create(b as never);
    const recs = await hashes.records();
    expect(recs).toHaveLength(1);
    expect(recs[0]?.record.body).toBeUndefined();
    expect(recs[0]?.record.prefix?.blocks).toHaveLength(2);
    expect(readFileSync(recs[0]!.file, 'utf8')).not.toContain('zebra');
  });

  it('stores a growing conversation as deltas and rebuilds every body byte-exactly', async () => {
    const full = await startProxy({ capture: 'full' });
    const client = new Anthropic({ apiKey: API_KEY, baseURL: full.proxy.url, maxRetries: 0 });
    let conv = agentConversation({ turns: 3, seed: 5 });
    const sent: string[] = [];
    for (let i = 0; i < 8; i++) {
      sent.push(JSON.stringify(conv));
      await client.messages.create(conv as never, { headers: { 'x-cacheward-session': 'grow' } });
      conv = appendUserTurn(conv, `turn ${i}`);
    }
    const recs = await full.records();
    expect(recs.map((r) => r.body?.toString('utf8'))).toEqual(sent);
    const stored = recs.slice(1).map((r) => (r.record.body?.text ?? '').length);
    const raw = sent.slice(1).map((s) => s.length);
    expect(stored.reduce((a, b) => a + b, 0)).toBeLessThan(raw.reduce((a, b) => a + b, 0) * 0.2);
    expect(recs[1]?.record.body?.base).toBe(recs[0]?.record.id);
    // The prefix blocks are stored as deltas too, and read back whole.
    const onDisk = readFileSync(recs[1]!.file, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l));
    expect(onDisk[1].prefix.base).toEqual({ id: recs[0]?.record.id, shared: expect.any(Number) });
    expect(onDisk[1].prefix.blocks.length).toBeLessThan(5);
    for (const [i, r] of recs.entries()) {
      const p = parsePrefix(sent[i] as string, { format: 'anthropic-messages' });
      expect(r.record.prefix?.blocks.map((b) => b.hash)).toEqual(p.blocks.map((b) => b.hash));
    }
  });

  it('stores a Claude Code-shaped conversation (tools and system after the messages) as deltas of moved blocks', async () => {
    const hashes = await startProxy({ capture: 'hashes' });
    const client = new Anthropic({ apiKey: API_KEY, baseURL: hashes.proxy.url, maxRetries: 0 });
    let conv = agentConversation({ turns: 3, seed: 7 });
    const sent: string[] = [];
    for (let i = 0; i < 6; i++) {
      // Claude Code's key order: every turn moves the tools' and the system prompt's bytes.
      const { model, max_tokens, messages, system, tools } = conv as Record<string, unknown>;
      const body = { model, max_tokens, messages, system, tools };
      sent.push(JSON.stringify(body));
      await client.messages.create(body as never, { headers: { 'x-cacheward-session': 'cc' } });
      conv = appendUserTurn(conv, `turn ${i}`);
    }
    const recs = await hashes.records();
    const onDisk = readFileSync(recs[1]!.file, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l));
    for (let i = 1; i < onDisk.length; i++) {
      const prev = recs[i - 1]?.record.prefix?.blocks.length ?? 0;
      expect(onDisk[i].prefix.base.shared).toBeGreaterThanOrEqual(prev - 1);
      expect(onDisk[i].prefix.base.moved.length).toBeGreaterThan(0);
      expect(onDisk[i].prefix.blocks.length).toBeLessThan(5);
    }
    // Read back, every record's blocks are its own request's, offsets included.
    for (const [i, r] of recs.entries()) {
      const p = capturePrefix(parsePrefix(sent[i] as string, { format: 'anthropic-messages' }));
      expect(r.record.prefix?.blocks).toEqual(p.blocks);
    }
  });

  it('keeps the folder under --max-mb, dropping the oldest files first', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cacheward-maxmb-'));
    const clock = new VirtualClock();
    const writer = new CaptureWriter({ dir, mode: 'hashes', clock, maxBytes: 4000, rotateBytes: 1000 });
    for (let i = 0; i < 40; i++) {
      writer.write(bareRecord(`r${i}`, 's', { times: { start: i }, error: 'x'.repeat(200) }));
      await writer.flush();
      clock.advance(1000);
    }
    await writer.close();
    const ids: string[] = [];
    for await (const r of readCaptures([dir])) ids.push(r.record.id);
    expect(ids.at(-1)).toBe('r39');
    expect(ids).not.toContain('r0');
    const { readdirSync, statSync } = await import('node:fs');
    const total = readdirSync(dir).reduce((a, n) => a + statSync(join(dir, n)).size, 0);
    expect(total).toBeLessThanOrEqual(4000 + 1000);
  });
});

describe('wrapFetch', () => {
  it('records the same captures in-process, streaming and not', async () => {
    const clock = new VirtualClock();
    const sim = createSimulator({ clock });
    const dir = mkdtempSync(join(tmpdir(), 'cacheward-wrap-'));
    const fetch = wrapFetch(sim.fetch, { dir, clock, capture: 'full' });
    const client = new Anthropic({ apiKey: API_KEY, baseURL: 'http://sim.invalid', fetch, maxRetries: 0 });
    const b = messagesBody(3, 200, { 2: EPHEMERAL });
    await client.messages.create(b as never);
    await client.messages.stream(b as never).finalMessage();
    await fetch.flush();
    const recs = [];
    for await (const r of readCaptures([dir])) recs.push(r.record);
    expect(recs).toHaveLength(2);
    expect(recs[0]).toMatchObject({ provider: 'anthropic', status: 200, stream: false });
    expect(recs[1]).toMatchObject({ stream: true, stopReason: 'end_turn' });
    expect(recs[1]?.usage?.normalized?.cacheRead).toBe(recs[0]?.usage?.normalized?.cacheWrite);
    expect(
      readFileSync(join(dir, (await import('node:fs')).readdirSync(dir)[0] as string), 'utf8'),
    ).not.toContain(API_KEY);
  });
});
