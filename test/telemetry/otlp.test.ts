// OTLP export on a real session through the proxy into the simulator, received by a collector in the
// test: spans with the GenAI conventions and cacheward's attributes (a miss with its cause among them),
// metric points with bounded labels; and a collector that is down costs only a dropped-points counter.

import { mkdtempSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { VirtualClock } from '../../src/core/clock.js';
import { type CachewardProxy, createProxy } from '../../src/proxy/create-proxy.js';
import { agentConversation, anthropicTool, appendUserTurn } from '../../src/sim/agent-conversation.js';
import { createSimulator, type Simulator } from '../../src/sim/simulator.js';
import { otlpOptions } from '../../src/telemetry/otlp-config.js';
import { SERVICE_INSTANCE_ID } from '../../src/telemetry/otlp-telemetry.js';
import { startCliProxy } from '../proxy/cli-proxy.js';
import { type OtlpReceiver, startOtlpReceiver } from './otlp-receiver.js';

type Json = Record<string, unknown>;
const KEY = 'cacheward-test-anthropic-key-0123456789abcdefghijklmnop';

/** Four turns of one agent session; from turn 3 an MCP tool is in tools[] (a tools_changed miss). */
function session(): Json[] {
  let conv = agentConversation({ turns: 3, seed: 91 });
  const out: Json[] = [];
  for (let turn = 1; turn <= 4; turn++) {
    const body = structuredClone(conv);
    if (turn >= 3) body.tools = [...(body.tools as Json[]), anthropicTool('mcp__db__query')];
    out.push(body);
    conv = appendUserTurn(conv, `turn ${turn + 1}`);
  }
  return out;
}

let receiver: OtlpReceiver;
let sim: Simulator;
let simUrl: string;
const clock = new VirtualClock();

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  sim = createSimulator({ clock });
  simUrl = await sim.listen();
});
afterAll(async () => {
  await sim.close();
  await receiver.close();
});

async function drive(proxy: Pick<CachewardProxy, 'url'>, label: string) {
  const client = new Anthropic({ apiKey: KEY, baseURL: proxy.url, maxRetries: 0 });
  const ids: string[] = [];
  for (const [i, body] of session().entries()) {
    clock.advance(20_000);
    const params = body as unknown as Anthropic.MessageCreateParamsNonStreaming;
    const headers = { 'x-cacheward-session': label };
    const message =
      i % 2
        ? await client.messages.stream(params, { headers }).finalMessage()
        : await client.messages.create(params, { headers });
    ids.push(message.id);
  }
  return ids;
}

describe('OTLP export', () => {
  it('sends a span per request with GenAI and cacheward attributes, and metric points by cause', async () => {
    const proxy = createProxy({
      upstream: simUrl,
      clock,
      capture: 'off',
      dir: mkdtempSync(join(tmpdir(), 'cacheward-otlp-')),
      fixes: ['tools-sort'],
      otlp: { endpoint: receiver.url, spanDelayMs: 20, metricIntervalMs: 60_000 },
      logger: {},
    });
    await proxy.listen();
    const ids = await drive(proxy, 'otel-session');
    await proxy.flush();
    expect(proxy.health().otlp).toMatchObject({ endpoint: receiver.url, dropped: 0 });
    // One service.instance.id per process, on the health endpoint too.
    const instance = proxy.health().otlp?.instance;
    expect(instance).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    await proxy.close();

    expect([...receiver.contentTypes]).toEqual(['application/json']);
    const spans = receiver.spans.filter((s) => s.attributes['cacheward.session.label'] === 'otel-session');
    expect(spans).toHaveLength(4);
    expect(spans.map((s) => s.attributes['gen_ai.response.id'])).toEqual(ids);
    for (const s of spans) {
      expect(s.name).toBe('chat claude-opus-5');
      expect(s.kind).toBe(3); // CLIENT
      expect(s.resource['service.name']).toBe('cacheward-proxy');
      expect(s.resource['service.instance.id']).toBe(instance);
      // The upstream it went to, and the output budget the request asked for.
      expect(s.attributes['server.address']).toBe('127.0.0.1');
      expect(s.attributes['server.port']).toBe(Number(new URL(simUrl).port));
      expect(s.attributes['gen_ai.request.max_tokens']).toBe(session()[0]?.max_tokens);
      expect(s.attributes).toMatchObject({
        'gen_ai.operation.name': 'chat',
        'gen_ai.provider.name': 'anthropic',
        'gen_ai.request.model': 'claude-opus-5',
        'gen_ai.response.model': 'claude-opus-5',
        'http.response.status_code': 200,
        'cacheward.fixes.applied': ['tools-sort'],
      });
      for (const k of [
        'gen_ai.usage.input_tokens',
        'gen_ai.usage.output_tokens',
        'gen_ai.usage.cache_read.input_tokens',
        'gen_ai.usage.cache_creation.input_tokens',
      ])
        expect(typeof s.attributes[k], k).toBe('number');
      expect(s.attributes['gen_ai.usage.input_tokens'] as number).toBeGreaterThan(1000);
      // The span covers the exchange: start and end at the proxy's (virtual) clock.
      expect(BigInt(s.endTimeUnixNano)).toBeGreaterThanOrEqual(BigInt(s.startTimeUnixNano));
    }
    const [t1, t2, t3, t4] = spans;
    const conversation = t1?.attributes['cacheward.conversation.id'];
    expect(conversation).toMatch(/^c-cw_/);
    expect(t1?.attributes).toMatchObject({
      'cacheward.conversation.relation': 'new',
      'cacheward.conversation.turn': 1,
    });
    expect(t2?.attributes).toMatchObject({
      'cacheward.conversation.relation': 'continues',
      'cacheward.conversation.id': conversation,
      'gen_ai.conversation.id': conversation,
      'cacheward.conversation.turn': 2,
      'cacheward.cache.miss': false,
    });
    expect(t2?.attributes['gen_ai.usage.cache_read.input_tokens'] as number).toBeGreaterThan(1000);
    // Turn 3 loaded a tool: the analyzer names the miss, what it re-wrote and what that wasted.
    expect(t3?.attributes).toMatchObject({
      'cacheward.cache.miss': true,
      'cacheward.miss.cause': 'tools_changed',
      'cacheward.conversation.relation': 'continues',
    });
    expect(t3?.attributes['cacheward.miss.rewritten_tokens'] as number).toBeGreaterThan(1000);
    expect(t3?.attributes['cacheward.miss.waste_usd'] as number).toBeGreaterThan(0);
    expect(String(t3?.attributes['cacheward.miss.description'])).toMatch(/tools changed/);
    expect(t4?.attributes['cacheward.cache.miss']).toBe(false);

    // Metric points, sent once at shutdown: requests, tokens by kind, misses by cause, waste, hit ratio.
    const point = (metric: string, match: Json = {}) =>
      receiver.points.filter(
        (p) => p.metric === metric && Object.entries(match).every(([k, v]) => p.attributes[k] === v),
      );
    const requests = point('cacheward.requests', { 'gen_ai.request.model': 'claude-opus-5' });
    expect(requests.reduce((n, p) => n + (p.value ?? 0), 0)).toBe(4);
    expect(point('cacheward.misses', { 'cacheward.miss.cause': 'tools_changed' })[0]?.value).toBe(1);
    expect(point('cacheward.waste', { 'cacheward.miss.cause': 'tools_changed' })[0]?.value).toBeGreaterThan(
      0,
    );
    expect(point('cacheward.tokens', { 'cacheward.token.kind': 'read' })[0]?.value).toBeGreaterThan(1000);
    const usage = point('gen_ai.client.token.usage', { 'gen_ai.token.type': 'input' });
    expect(usage[0]?.count).toBe(4);
    const ratio = point('cacheward.cache.hit_ratio')[0]?.value ?? -1;
    expect(ratio).toBeGreaterThan(0);
    expect(ratio).toBeLessThan(1);
    // No session label or conversation among metric labels: their sets stay bounded.
    for (const p of receiver.points) {
      expect(Object.keys(p.attributes)).not.toContain('cacheward.session.label');
      expect(Object.keys(p.attributes)).not.toContain('cacheward.conversation.id');
    }
  });

  it("names the OpenAI output budget as gen_ai.request.max_tokens, from Chat's and Responses' own fields", async () => {
    const proxy = createProxy({
      upstream: simUrl,
      clock,
      capture: 'off',
      dir: mkdtempSync(join(tmpdir(), 'cacheward-otlp-openai-')),
      otlp: { endpoint: receiver.url, spanDelayMs: 20, metricIntervalMs: 60_000 },
      logger: {},
    });
    await proxy.listen();
    const client = new OpenAI({ apiKey: 'sk-test-otlp', baseURL: `${proxy.url}/v1`, maxRetries: 0 });
    const headers = { 'x-cacheward-session': 'otel-openai' };
    await client.chat.completions.create(
      { model: 'gpt-5.4', max_completion_tokens: 77, messages: [{ role: 'user', content: 'hello' }] },
      { headers },
    );
    await client.responses.create({ model: 'gpt-5.4', max_output_tokens: 88, input: 'hello' }, { headers });
    await proxy.flush();
    await proxy.close();
    const spans = receiver.spans.filter((s) => s.attributes['cacheward.session.label'] === 'otel-openai');
    expect(spans.map((s) => s.attributes['gen_ai.request.max_tokens'])).toEqual([77, 88]);
    for (const s of spans) expect(s.attributes['server.port']).toBe(Number(new URL(simUrl).port));
  });

  it('costs nothing but a dropped counter when the collector is down', async () => {
    const down = await startOtlpReceiver();
    const url = down.url;
    await down.close(); // nothing listens there any more
    const proxy = createProxy({
      upstream: simUrl,
      clock,
      capture: 'off',
      dir: mkdtempSync(join(tmpdir(), 'cacheward-otlp-down-')),
      otlp: { endpoint: url, spanDelayMs: 10, metricIntervalMs: 60_000, exportTimeoutMs: 500 },
      logger: {},
    });
    await proxy.listen();
    const t0 = performance.now();
    const ids = await drive(proxy, 'down-session');
    const elapsed = performance.now() - t0;
    expect(ids).toHaveLength(4);
    expect(elapsed).toBeLessThan(3_000);
    await proxy.flush();
    const h = proxy.health();
    expect(h.status).toBe('ok');
    expect(h.otlp?.dropped).toBeGreaterThanOrEqual(4);
    expect(h.otlp?.exported).toBe(0);
    const metrics = await (await fetch(`${proxy.url}/_cacheward/metrics`)).text();
    expect(metrics).toMatch(/cacheward_otlp_dropped_total\{signal="traces"\} [4-9]/);
    await proxy.close();
  });
});

describe('stopping with a collector that does not answer', () => {
  it('SIGTERM ends the proxy within 2 s, and one line says how many spans were dropped', async () => {
    // One collector refuses connections; another accepts them and never answers.
    const refused = await startOtlpReceiver();
    const refusedUrl = refused.url;
    await refused.close();
    const silent = createServer((socket) => socket.on('data', () => {}));
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', () => r()));
    const silentUrl = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
    try {
      for (const collector of [refusedUrl, silentUrl]) {
        // Spans wait in the batch for a minute: at the stop, every one of them is still unsent.
        const p = await startCliProxy(
          ['--upstream', simUrl, '--capture', 'off', '--no-warm-up', '--otlp', collector],
          {
            env: { OTEL_BSP_SCHEDULE_DELAY: '60000' },
          },
        );
        const ids = await drive(p, `stop-${collector}`);
        expect(ids).toHaveLength(4);
        // Another process: another service.instance.id.
        type Health = { otlp: { instance: string } };
        const other = ((await (await fetch(`${p.url}/_cacheward/health`)).json()) as Health).otlp.instance;
        expect(other).toMatch(/^[0-9a-f-]{36}$/);
        expect(other).not.toBe(SERVICE_INSTANCE_ID);
        // A span is made once its exchange has been analyzed: all four have been when the page counts four.
        type State = { totals: { requests: number } };
        while (((await (await fetch(`${p.url}/_cacheward/state`)).json()) as State).totals.requests < 4)
          await new Promise((r) => setTimeout(r, 20));
        const t0 = performance.now();
        p.child.kill('SIGTERM');
        expect(await p.exited).toBe(0);
        expect(performance.now() - t0).toBeLessThan(2_000);
        const said = p.stderr.filter((l) => l.includes('spans not sent were dropped'));
        expect(said).toHaveLength(1);
        expect(said[0]).toMatch(/did not take the last export within 1000 ms of the stop; 4 spans not sent/);
      }
    } finally {
      silent.close();
    }
  }, 60_000);
});

describe('where OTLP goes', () => {
  it('takes --otlp or OTEL_EXPORTER_OTLP_ENDPOINT, per-signal endpoints, and refuses what is not HTTP', () => {
    expect(otlpOptions(undefined, {})).toBeUndefined();
    expect(otlpOptions('http://127.0.0.1:4318/', {})).toMatchObject({
      tracesUrl: 'http://127.0.0.1:4318/v1/traces',
      metricsUrl: 'http://127.0.0.1:4318/v1/metrics',
      serviceName: 'cacheward-proxy',
    });
    expect(
      otlpOptions(undefined, {
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318',
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://traces:4318/custom',
        OTEL_SERVICE_NAME: 'gateway',
      }),
    ).toMatchObject({
      tracesUrl: 'http://traces:4318/custom',
      metricsUrl: 'http://collector:4318/v1/metrics',
      serviceName: 'gateway',
    });
    expect(() => otlpOptions('grpc://x:4317', {})).toThrow(/OTLP is exported over HTTP/);
    expect(() => otlpOptions('not a url', {})).toThrow(/--otlp not a url is not a URL/);
  });
});
