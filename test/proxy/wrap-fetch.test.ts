// wrapFetch's record of a response the app does not read to its end: cancelled by the app, or broken
// mid-stream by the upstream; and a recording failure that must never reach the app's request.

import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
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
