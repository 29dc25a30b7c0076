// wrapFetch with fixes runs the proxy's exchange: a real SDK's conversation whose tools grow keeps its cache
// through tools-freeze; every byte outside a fix's change arrives as the app sent it; a fix the provider
// refuses is withdrawn (the app's own request sent once, the app gets that answer, the next goes unfixed).

import { existsSync, mkdtempSync, readdirSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PriceTable } from '../../src/analyze/price-table.js';
import type { ReadRecord } from '../../src/capture/capture-reader.js';
import { VirtualClock } from '../../src/core/clock.js';
import { type ClientEdit, undeclaredDifference } from '../../src/fixes/byte-patch.js';
import { type FetchLike, type WrapFetchOptions, wrapFetch } from '../../src/proxy/wrap-fetch.js';
import type { CaptureRecord } from '../../src/record/capture-record.js';
import { analyzePaths } from '../../src/report/analyze-paths.js';
import { renderTerminalReport } from '../../src/report/terminal-report.js';
import { createSimulator } from '../../src/sim/simulator.js';
import { CASES, expectRefusalRecords, KEY, playCase, records } from './refusal-cases.js';

const quiet = { warn: () => {}, info: () => {} };
const same = (t: string) => t;
const plain = { bold: same, dim: same, yellow: same, green: same };

/** One fix's recorded patches (`[start, end, length written]` in the client's bytes) as the edits they make. */
function editsOf(patches: ReadonlyArray<[number, number, number]>): ClientEdit[] {
  let shift = 0;
  return patches.map(([start, end, length]) => {
    const edit = { start, end, at: start + shift, length };
    shift += length - (end - start);
    return edit;
  });
}

describe('wrapFetch with fixes', () => {
  const clock = new VirtualClock();
  const sim = createSimulator({ clock });
  let simUrl: string;
  beforeAll(async () => {
    simUrl = await sim.listen();
  });
  afterAll(() => sim.close());

  it('keeps a real SDK conversation whose tools grow warm with tools-freeze, where the same calls without it miss', async () => {
    const tool = (name: string) => ({
      name,
      description: `the ${name} tool, which does ${name} things at length`.repeat(20),
      input_schema: { type: 'object' as const, properties: { q: { type: 'string' } } },
    });
    const system = 'You are a careful assistant. '.repeat(200);
    // Six turns; a tool is added before the fourth (as an MCP server that grows).
    const run = async (fixes: string[], model = 'claude-opus-5') => {
      const dir = mkdtempSync(join(tmpdir(), 'cacheward-wrap-fix-'));
      const f = wrapFetch(globalThis.fetch, { dir, capture: 'full', fixes, logger: quiet });
      const client = new Anthropic({ apiKey: KEY, baseURL: simUrl, maxRetries: 0, fetch: f });
      const messages: Anthropic.MessageParam[] = [];
      const reads: number[] = [];
      for (let turn = 0; turn < 6; turn++) {
        clock.advance(5_000);
        messages.push({ role: 'user', content: `turn ${turn}: go on` });
        const tools = [tool('alpha'), tool('beta'), ...(turn >= 3 ? [tool('gamma')] : [])];
        const res = await client.messages.create({
          model,
          max_tokens: 64,
          system: [{ type: 'text', text: system, cache_control: { type: 'ephemeral' } }],
          tools,
          messages: messages.map((m, i) =>
            i === messages.length - 1
              ? {
                  ...m,
                  content: [{ type: 'text', text: String(m.content), cache_control: { type: 'ephemeral' } }],
                }
              : m,
          ),
        });
        reads.push(res.usage.cache_read_input_tokens ?? 0);
        messages.push({ role: 'assistant', content: res.content as Anthropic.ContentBlockParam[] });
      }
      await f.close();
      return { reads, records: await records(dir), dir };
    };
    const direct = await run([]);
    const fixed = await run(['tools-freeze']);
    // The report says how many requests each fix changed, and names the miss the fix avoided.
    const report = await analyzePaths([fixed.dir], { prices: new PriceTable() });
    const changed = fixed.records.filter((r) =>
      r.record.fixes.some((n) => n.fix === 'tools-freeze' && n.changed),
    );
    expect(report.fixesApplied).toEqual({ 'tools-freeze': changed.length });
    expect(renderTerminalReport(report, plain).join('\n')).toContain(
      `fixes applied: tools-freeze ${changed.length}×`,
    );
    const unfixed = await analyzePaths([direct.dir], { prices: new PriceTable() });
    expect(unfixed.fixesApplied).toBeUndefined();
    expect(unfixed.byCause.map((c) => c.cause)).toContain('tools_changed');
    // Without the fix, the grown tools[] breaks the cache at the fourth turn; with it, that turn reads it.
    expect(direct.reads[3]).toBe(0);
    expect(fixed.reads[3]).toBeGreaterThan(0);
    expect(fixed.reads.slice(1).every((r) => r > 0)).toBe(true);
    // The fix ran in the exchange: said in the records, the client's own bytes kept beside the forwarded ones.
    const grown = fixed.records[3] as ReadRecord;
    expect(grown.record.fixes.find((n) => n.fix === 'tools-freeze')?.changed).toBe(true);
    expect(grown.clientBody).toBeDefined();
    expect(grown.body?.equals(grown.clientBody as Buffer)).toBe(false);
    // Every byte outside the fix's declared patches goes out as the SDK made it.
    // (A record whose bodies the capture let go under load says `bodyDropped`: nothing to compare there.)
    for (const r of fixed.records) {
      if (r.record.bodyDropped) continue;
      const patches = r.record.fixes.find((n) => n.fix === 'tools-freeze')?.patches ?? [];
      if (r.clientBody)
        expect(undeclaredDifference(r.clientBody, r.body as Buffer, editsOf(patches))).toBeUndefined();
      else expect(patches).toEqual([]);
    }
    // On a model without mid-conversation tool changes the fix stands aside, and the report says so and why.
    const older = await run(['tools-freeze'], 'claude-opus-4-1');
    expect(older.reads[3]).toBe(0);
    const left = await analyzePaths([older.dir], { prices: new PriceTable() });
    expect(left.fixesApplied).toBeUndefined();
    expect(left.byCause.map((c) => c.cause)).toContain('tools_changed');
    const said = 'claude-opus-4-1 does not support mid-conversation tool changes: forwarded unchanged';
    expect(left.fixesLeftAsSent).toEqual([{ fix: 'tools-freeze', note: said, said: 1 }]);
    expect(renderTerminalReport(left, plain).join('\n')).toContain(
      `fixes that left requests as sent: tools-freeze "${said}" (said 1×)`,
    );
    // Each request resolved once: a conversation of six turns, each continuing the one before.
    expect(fixed.records.map((r) => r.record.conversation?.relation)).toEqual([
      'new',
      'continues',
      'continues',
      'continues',
      'continues',
      'continues',
    ]);
  });

  it.each(CASES.map((c) => [`${c.fix}${c.route ? ` (${c.route}, ${c.status})` : ''}`, c] as const))(
    '%s refused: the app gets the answer to its own request, sent once, and the next request goes unfixed',
    async (_name, c) => {
      const dir = mkdtempSync(join(tmpdir(), 'cacheward-wrap-refusal-'));
      const logs: string[] = [];
      const seen: CaptureRecord[] = [];
      const f = wrapFetch(globalThis.fetch, {
        dir,
        clock,
        capture: 'full',
        fixes: [c.fix],
        logger: { warn: (l) => logs.push(l), info: () => {} },
        onRecord: (r) => seen.push(r),
      });
      const before = sim.stats().requests;
      const sent = await playCase(
        c,
        (route, init) => f(`${simUrl}${route}`, init),
        () => clock.advance(5_000),
      );
      await f.close();
      expect(sim.stats().requests - before).toBe(c.turns.length + 1);
      expect(logs.filter((l) => l.includes('refused by the provider'))).toHaveLength(1);
      expect(seen).toHaveLength(c.turns.length);
      expectRefusalRecords(c, await records(dir), sent);
    },
  );

  it('fixes a Request object as it fixes a url and init, and lets a streamed body go out untouched', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cacheward-wrap-request-'));
    const seen: CaptureRecord[] = [];
    const f = wrapFetch(globalThis.fetch, {
      dir,
      clock,
      fixes: ['tools-freeze'],
      logger: quiet,
      onRecord: (r) => seen.push(r),
    });
    const body = JSON.stringify({
      model: 'claude-opus-5',
      max_tokens: 64,
      tools: [{ name: 'alpha', description: 'a', input_schema: { type: 'object' } }],
      messages: [{ role: 'user', content: 'hello' }],
    });
    const headers = { 'content-type': 'application/json', 'x-api-key': KEY };
    const res = await f(new Request(`${simUrl}/v1/messages`, { method: 'POST', headers, body }));
    expect(res.status).toBe(200);
    await res.text();
    const streamed = new ReadableStream<Uint8Array>({
      start(c) {
        c.enqueue(new TextEncoder().encode(body));
        c.close();
      },
    });
    const res2 = await f(`${simUrl}/v1/messages`, {
      method: 'POST',
      headers,
      body: streamed,
      duplex: 'half',
    } as RequestInit);
    expect(res2.status).toBe(200);
    await res2.text();
    await f.close();
    expect(seen.map((r) => r.fixes.find((n) => n.fix === 'tools-freeze')?.changed)).toEqual([
      true,
      undefined,
    ]);
  });
});

/** An upstream `fetch` that keeps every request it got (bytes and headers) and answers from a list. */
function stubUpstream(answers: Array<() => Response>) {
  const got: Array<{ body: Buffer; headers: Record<string, string> }> = [];
  const fetch: FetchLike = async (input, init) => {
    const req = new Request(input, init);
    const headers: Record<string, string> = {};
    req.headers.forEach((v, k) => {
      headers[k] = v;
    });
    got.push({ body: Buffer.from(await req.arrayBuffer()), headers });
    const answer = answers[Math.min(got.length - 1, answers.length - 1)] as () => Response;
    return answer();
  };
  return { fetch, got };
}

const TOOLS_BODY = JSON.stringify({
  model: 'claude-opus-5',
  max_tokens: 64,
  tools: [{ name: 'alpha', description: 'a', input_schema: { type: 'object' } }],
  messages: [{ role: 'user', content: 'hello' }],
});
const ok = () =>
  Response.json({
    id: 'msg_1',
    type: 'message',
    role: 'assistant',
    model: 'claude-opus-5',
    content: [{ type: 'text', text: 'hi' }],
    usage: { input_tokens: 10, output_tokens: 1 },
  });
const error400 = (type: string, message: string) => () =>
  Response.json({ type: 'error', error: { type, message } }, { status: 400 });

describe('wrapFetch with fixes, what reaches the upstream', () => {
  const make = (fetch: FetchLike, seen: CaptureRecord[] = []) =>
    wrapFetch(fetch, {
      dir: mkdtempSync(join(tmpdir(), 'cacheward-wrap-stub-')),
      fixes: ['tools-freeze'],
      logger: quiet,
      onRecord: (r) => seen.push(r),
    });

  it("sends the fixed body with the app's own headers, method and string body kind; only the length and the declared beta differ", async () => {
    const up = stubUpstream([ok]);
    const seen: CaptureRecord[] = [];
    const f = make(up.fetch, seen);
    const headers = { 'x-api-key': KEY, 'anthropic-version': '2023-06-01', 'x-app': 'mine' };
    const res = await f('https://api.anthropic.com/v1/messages', {
      method: 'POST',
      headers,
      body: TOOLS_BODY,
    });
    await res.json();
    await f.close();
    // Directly, the same call would have sent exactly these headers (a string body is text/plain by default).
    const direct = new Request('https://api.anthropic.com/v1/messages', {
      method: 'POST',
      headers,
      body: TOOLS_BODY,
    });
    const expected: Record<string, string> = {};
    direct.headers.forEach((v, k) => {
      expected[k] = v;
    });
    const got = up.got[0] as { body: Buffer; headers: Record<string, string> };
    // The one header added is the beta the fix declares (its `beta` change).
    const beta = seen[0]?.fixes.flatMap((n) => n.changes ?? []).find((c) => c.kind === 'beta');
    expect(beta).toEqual({ kind: 'beta', value: 'mid-conversation-tool-changes-2026-07-01' });
    expect(got.headers).toEqual({ ...expected, 'anthropic-beta': beta?.kind === 'beta' ? beta.value : '' });
    expect(got.body.toString()).toContain('cacheward_deferred_placeholder');
    expect(up.got).toHaveLength(1);
  });

  it("resends the app's own Request once when the fixed form is refused, and the app gets that answer", async () => {
    const up = stubUpstream([error400('invalid_request_error', 'no'), ok]);
    const seen: CaptureRecord[] = [];
    const f = make(up.fetch, seen);
    const abort = new AbortController();
    const req = new Request('https://api.anthropic.com/v1/messages', {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': KEY },
      body: TOOLS_BODY,
      signal: abort.signal,
    });
    const res = await f(req);
    expect(res.status).toBe(200);
    expect(((await res.json()) as { id: string }).id).toBe('msg_1');
    await f.close();
    expect(up.got).toHaveLength(2);
    expect(up.got[0]?.body.toString()).toContain('cacheward_deferred_placeholder');
    expect(up.got[1]?.body.toString()).toBe(TOOLS_BODY);
    expect(seen[0]?.fixes.find((n) => n.fix === 'tools-freeze')?.refused?.status).toBe(400);
  });

  it('sends a body the fixes cannot read exactly as the app made it, and says why in the record', async () => {
    const up = stubUpstream([ok]);
    const seen: CaptureRecord[] = [];
    const f = make(up.fetch, seen);
    const torn = `${TOOLS_BODY.slice(0, 60)}`;
    const res = await f('https://api.anthropic.com/v1/messages', {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': KEY },
      body: torn,
    });
    await res.text();
    await f.close();
    expect(up.got).toHaveLength(1);
    expect(up.got[0]?.body.toString()).toBe(torn);
    expect(seen[0]?.fixes[0]?.notes).toEqual(['skipped: the body could not be parsed']);
  });

  it("throws the fetch's own error to the app when the fixed request cannot be sent, and records it", async () => {
    const seen: CaptureRecord[] = [];
    const f = make(async () => {
      throw new TypeError('fetch failed');
    }, seen);
    await expect(
      f('https://api.anthropic.com/v1/messages', {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': KEY },
        body: TOOLS_BODY,
      }),
    ).rejects.toThrow('fetch failed');
    await f.close();
    expect(seen.map((r) => r.outcome)).toEqual(['upstream_error']);
    expect(seen[0]?.fixes.find((n) => n.fix === 'tools-freeze')?.changed).toBe(true);
  });

  it('hands an error that is not a refusal to the app as sent, the fixed request sent once', async () => {
    const big = () =>
      new Response(
        JSON.stringify({
          type: 'error',
          error: { type: 'invalid_request_error', message: 'x'.repeat(300_000) },
        }),
        {
          status: 400,
          headers: { 'content-type': 'application/json' },
        },
      );
    for (const [answer, what] of [
      [error400('not_found_error', 'no such model'), 'not_found_error'],
      [big, 'invalid_request_error'],
      [() => new Response('upstream overloaded', { status: 529 }), undefined],
    ] as const) {
      const up = stubUpstream([answer]);
      const f = make(up.fetch);
      const res = await f('https://api.anthropic.com/v1/messages', {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': KEY },
        body: TOOLS_BODY,
      });
      const text = await res.text();
      expect(text).toBe(await answer().text());
      if (what) expect((JSON.parse(text) as { error: { type: string } }).error.type).toBe(what);
      expect(up.got).toHaveLength(1);
      await f.close();
    }
  });
});

describe('wrapFetch refuses arguments a plain-JS caller can get wrong, before it opens a file', () => {
  it.each([
    ['no fetch', undefined, {}, /first argument \(e\.g\. globalThis\.fetch\), not undefined/],
    [
      'a misspelled option',
      globalThis.fetch,
      { captrue: 'full' },
      /unknown option captrue; it takes capture/,
    ],
    [
      'an unknown capture mode',
      globalThis.fetch,
      { capture: 'everything' },
      /capture must be 'off', 'hashes' or 'full'/,
    ],
    [
      'fixes as one string',
      globalThis.fetch,
      { fixes: 'tools-freeze' },
      /fixes must be a list .* \['tools-freeze'\]/,
    ],
    [
      'an unknown fix',
      globalThis.fetch,
      { fixes: ['tools-freez'] },
      /unknown fix "tools-freez"; known fixes: tools-freeze/,
    ],
  ])('%s', (_name, fetch, options, message) => {
    const dir = mkdtempSync(join(tmpdir(), 'cacheward-wrap-args-'));
    expect(() =>
      wrapFetch(fetch as unknown as FetchLike, { dir, ...(options as object) } as WrapFetchOptions),
    ).toThrow(message);
    expect(readdirSync(dir)).toEqual([]);
  });
});

describe('wrapFetch and its capture folder', () => {
  it('opens its capture file with the first record: a wrapper never used leaves no file', async () => {
    const dir = join(mkdtempSync(join(tmpdir(), 'cacheward-wrap-lazy-')), 'captures');
    const unused = wrapFetch(globalThis.fetch, { dir, logger: quiet });
    await new Promise((r) => setTimeout(r, 50));
    expect(existsSync(dir) ? readdirSync(dir) : []).toEqual([]);
    const f = wrapFetch(
      async () => new Response(JSON.stringify({ id: 'msg_1', usage: { input_tokens: 3, output_tokens: 1 } })),
      { dir, logger: quiet },
    );
    const res = await f('https://api.anthropic.com/v1/messages', {
      method: 'POST',
      body: JSON.stringify({
        model: 'claude-opus-5',
        max_tokens: 5,
        messages: [{ role: 'user', content: 'hi' }],
      }),
    });
    await res.text();
    await f.flush();
    const files = readdirSync(dir);
    expect(files).toHaveLength(1);
    expect(statSync(join(dir, files[0] as string)).mode & 0o777).toBe(0o600);
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    await f.close();
    await unused.close();
  });
});
