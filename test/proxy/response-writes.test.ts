// How a streamed response is written to the client: a chunk the upstream sent alone is passed on before the
// upstream sends the next, and chunks that arrived together go out with the response's end in one write.

import { mkdtempSync } from 'node:fs';
import { createServer, request as httpRequest, type Server, type ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createProxy } from '../../src/proxy/create-proxy.js';
import { messagesBody } from '../sim/helpers.js';
import { API_KEY, listenOnLoopback } from './helpers.js';

const closers: Array<() => Promise<unknown>> = [];
afterAll(async () => {
  for (const c of closers.reverse()) await c();
});

const listen = (server: Server) => listenOnLoopback(server, closers);

async function proxyTo(upstream: string): Promise<string> {
  const p = createProxy({
    upstream,
    dir: join(mkdtempSync(join(tmpdir(), 'cacheward-writes-')), 'captures'),
    logger: {},
  });
  const url = await p.listen();
  closers.push(() => p.close());
  return url;
}

const event = (type: string, data: Record<string, unknown>) =>
  `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
const message = {
  id: 'msg_writes',
  type: 'message',
  role: 'assistant',
  model: 'claude-opus-5',
  content: [],
  stop_reason: null,
  stop_sequence: null,
  usage: { input_tokens: 10, output_tokens: 1 },
};
const opening = event('message_start', { message });
const rest = [
  event('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }),
  event('content_block_delta', { index: 0, delta: { type: 'text_delta', text: 'hello' } }),
  event('content_block_stop', { index: 0 }),
  event('message_delta', {
    delta: { stop_reason: 'end_turn', stop_sequence: null },
    usage: { output_tokens: 2 },
  }),
  event('message_stop', {}),
].join('');
const sse = (res: ServerResponse) => res.writeHead(200, { 'content-type': 'text/event-stream' });

describe('streamed responses', () => {
  it('passes on a chunk the upstream sent alone before the upstream sends the next', async () => {
    // The upstream sends the rest only once the client has the first event: held back, the test would hang.
    let clientHasFirst: () => void = () => {};
    const seen = new Promise<void>((r) => {
      clientHasFirst = r;
    });
    const upstream = createServer((req, res) => {
      req.resume();
      req.on('end', async () => {
        sse(res);
        res.write(opening);
        await seen;
        res.end(rest);
      });
    });
    const client = new Anthropic({
      apiKey: API_KEY,
      baseURL: await proxyTo(await listen(upstream)),
      maxRetries: 0,
    });
    const stream = await client.messages.create({
      model: 'claude-opus-5',
      max_tokens: 16,
      messages: [{ role: 'user', content: 'hello' }],
      stream: true,
    });
    const types: string[] = [];
    // Held back, the first event would come only once the upstream gave up waiting (and sent the rest).
    let gaveUp = false;
    const timeout = setTimeout(() => {
      gaveUp = true;
      clientHasFirst();
    }, 5_000);
    let early = false;
    for await (const e of stream) {
      types.push(e.type);
      if (e.type === 'message_start') {
        early = !gaveUp;
        clientHasFirst();
      }
    }
    clearTimeout(timeout);
    expect(early).toBe(true);
    expect(types).toEqual([
      'message_start',
      'content_block_start',
      'content_block_delta',
      'content_block_stop',
      'message_delta',
      'message_stop',
    ]);
  });

  describe('socket writes', () => {
    const write = Socket.prototype._write;
    const writev = Socket.prototype._writev;
    afterEach(() => {
      Socket.prototype._write = write;
      Socket.prototype._writev = writev;
    });

    it('writes chunks that arrived together and the end of the response in one write', async () => {
      // The whole answer in one upstream write: the proxy reads it at once.
      const upstream = createServer((req, res) => {
        req.resume();
        req.on('end', () => {
          sse(res);
          res.end(opening + rest);
        });
      });
      const url = new URL(await proxyTo(await listen(upstream)));
      // Writes the proxy makes on each client connection (its sockets in this process, by the peer's port).
      const writes = new Map<number, number>();
      const count = (s: Socket) => {
        if (s.remotePort !== undefined) writes.set(s.remotePort, (writes.get(s.remotePort) ?? 0) + 1);
      };
      Socket.prototype._write = function (this: Socket, ...args: Parameters<typeof write>) {
        count(this);
        return write.apply(this, args);
      };
      Socket.prototype._writev = function (this: Socket, ...args: Parameters<NonNullable<typeof writev>>) {
        count(this);
        return writev?.apply(this, args);
      };
      const body = JSON.stringify({ ...messagesBody(2, 50), stream: true });
      const { port, text } = await new Promise<{ port: number; text: string }>((resolve, reject) => {
        const req = httpRequest(
          {
            host: url.hostname,
            port: url.port,
            path: '/v1/messages',
            method: 'POST',
            headers: { 'content-type': 'application/json', 'x-api-key': API_KEY },
            agent: false,
          },
          (res) => {
            let text = '';
            res.setEncoding('utf8');
            res.on('data', (d: string) => {
              text += d;
            });
            res.on('end', () => resolve({ port: req.socket?.localPort as number, text }));
          },
        );
        req.on('error', reject);
        req.end(body);
      });
      expect(text).toBe(opening + rest);
      // The status line, the headers, every event and the last chunk: one write to the client.
      expect(writes.get(port)).toBe(1);
    });
  });
});
