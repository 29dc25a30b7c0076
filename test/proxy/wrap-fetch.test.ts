// wrapFetch's record of a response the app does not read to its end: cancelled by the app, or broken
// mid-stream by the upstream; and a recording failure that must never reach the app's request.

import { getEventListeners } from 'node:events';
import { mkdtempSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FetchLike, wrapFetch } from '../../src/proxy/wrap-fetch.js';
import type { CaptureRecord } from '../../src/record/capture-record.js';

const BODY = JSON.stringify({
  model: 'claude-opus-5',
  max_tokens: 5,
  stream: true,
  messages: [{ role: 'user', content: 'hello' }],
});
const START =
  'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","model":"claude-opus-5","usage":{"input_tokens":5,"output_tokens":1}}}\n\n';

/** An upstream that sends the first event, then waits: `end` finishes the stream or breaks it. */
function upstream(): { fetch: FetchLike; end: (how: 'finish' | 'break') => void } {
  let control: ReadableStreamDefaultController<Uint8Array> | undefined;
  return {
    fetch: async () =>
      new Response(
        new ReadableStream<Uint8Array>({
          start(c) {
            control = c;
            c.enqueue(new TextEncoder().encode(START));
          },
        }),
        { status: 200, headers: { 'content-type': 'text/event-stream' } },
      ),
    end(how) {
      if (how === 'break') control?.error(new Error('socket hang up'));
      else {
        control?.enqueue(new TextEncoder().encode('event: message_stop\ndata: {"type":"message_stop"}\n\n'));
        control?.close();
      }
    },
  };
}

function wrapped(up: FetchLike, onRecord: (r: CaptureRecord) => void) {
  const dir = mkdtempSync(join(tmpdir(), 'cacheward-wrap-'));
  return wrapFetch(up, { dir, capture: 'hashes', onRecord, logger: { warn: () => {}, info: () => {} } });
}

const post = { method: 'POST', body: BODY, headers: { 'content-type': 'application/json' } };
const URL_ = 'https://api.anthropic.com/v1/messages';

describe('wrapFetch, a response not read to its end', () => {
  it('records a body the app cancels as client_aborted', async () => {
    const up = upstream();
    const records: CaptureRecord[] = [];
    const f = wrapped(up.fetch, (r) => records.push(r));
    const res = await f(URL_, post);
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    expect(new TextDecoder().decode((await reader.read()).value)).toContain('message_start');
    await reader.cancel('the app went away');
    await f.flush();
    expect(records.map((r) => r.outcome)).toEqual(['client_aborted']);
    expect(records[0]?.responseId).toBe('msg_1');
    await f.close();
  });

  it('records a body the upstream breaks as upstream_reset, and the app sees the error', async () => {
    const up = upstream();
    const records: CaptureRecord[] = [];
    const f = wrapped(up.fetch, (r) => records.push(r));
    const res = await f(URL_, post);
    const reading = res.text();
    up.end('break');
    await expect(reading).rejects.toThrow(/socket hang up/);
    expect(records.map((r) => r.outcome)).toEqual(['upstream_reset']);
    expect(records[0]?.error).toMatch(/dropped mid-response: socket hang up/);
    await f.close();
  });

  it('records a body read to its end before the app sees the end', async () => {
    const up = upstream();
    const records: CaptureRecord[] = [];
    const f = wrapped(up.fetch, (r) => records.push(r));
    const res = await f(URL_, post);
    const reading = res.text();
    up.end('finish');
    expect(await reading).toContain('message_stop');
    expect(records.map((r) => r.outcome)).toEqual(['complete']);
    await f.close();
  });

  it('hands the app its whole response when recording fails', async () => {
    const up = upstream();
    const warnings: string[] = [];
    const dir = mkdtempSync(join(tmpdir(), 'cacheward-wrap-'));
    const f = wrapFetch(up.fetch, {
      dir,
      capture: 'hashes',
      onRecord: () => {
        throw new Error('a subscriber that throws');
      },
      logger: { warn: (l) => warnings.push(l), info: () => {} },
    });
    const res = await f(URL_, post);
    const reading = res.text();
    up.end('finish');
    expect(await reading).toContain('message_stop');
    expect(warnings.join('\n')).toMatch(/not recorded: a subscriber that throws/);
    await f.close();
  });
});

describe("wrapFetch with one AbortSignal for many calls (an agent session's controller)", () => {
  it('lets the signal go once each body has ended, read whole, broken or cancelled', async () => {
    const records: CaptureRecord[] = [];
    const session = new AbortController();
    for (const how of ['finish', 'break', 'cancel'] as const)
      for (let i = 0; i < 5; i++) {
        const up = upstream();
        const f = wrapped(up.fetch, (r) => records.push(r));
        const res = await f(URL_, { ...post, signal: session.signal });
        if (how === 'cancel') await (res.body as ReadableStream<Uint8Array>).cancel('done with it');
        else {
          const reading = res.text().catch(() => 'broken');
          up.end(how);
          await reading;
        }
        await f.close();
      }
    // Every exchange ended and was recorded; none is held by the signal the app keeps.
    expect(records.map((r) => r.outcome)).toEqual([
      ...Array(5).fill('complete'),
      ...Array(5).fill('upstream_reset'),
      ...Array(5).fill('client_aborted'),
    ]);
    expect(getEventListeners(session.signal, 'abort')).toHaveLength(0);
  });
});

describe('wrapFetch around the platform fetch, on a real server', () => {
  let server: Server;
  let url = '';
  beforeAll(async () => {
    server = createServer((req, res) => {
      if (req.url === '/gzip/v1/messages') {
        const body = gzipSync(
          JSON.stringify({
            id: 'msg_gz',
            type: 'message',
            model: 'claude-opus-5',
            content: [],
            usage: { input_tokens: 11, output_tokens: 2, cache_read_input_tokens: 5 },
          }),
        );
        res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' });
        res.end(body);
        return;
      }
      // A stream that sends its first event and then waits (for the client to go away).
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(START);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => {
    server.closeAllConnections();
    server.close();
  });

  it('reads a compressed response as the fetch decoded it: its usage is recorded', async () => {
    const records: CaptureRecord[] = [];
    const f = wrapped(globalThis.fetch, (r) => records.push(r));
    const res = await f(`${url}/gzip/v1/messages`, post);
    expect(((await res.json()) as { id: string }).id).toBe('msg_gz');
    expect(records[0]?.outcome).toBe('complete');
    expect(records[0]?.responseId).toBe('msg_gz');
    expect(records[0]?.usage?.normalized?.inputTotal).toBe(16);
    await f.close();
  });

  it("records the app's abort as client_aborted, while it reads or not", async () => {
    const records: CaptureRecord[] = [];
    const f = wrapped(globalThis.fetch, (r) => records.push(r));
    for (const reading of [true, false]) {
      const abort = new AbortController();
      const res = await f(`${url}/v1/messages`, { ...post, signal: abort.signal });
      const reader = (res.body as ReadableStream<Uint8Array>).getReader();
      await reader.read();
      const pending = reading ? reader.read().catch((e: Error) => e) : undefined;
      abort.abort();
      await pending;
    }
    await f.flush();
    expect(records.map((r) => r.outcome)).toEqual(['client_aborted', 'client_aborted']);
    await f.close();
  });
});
