// close() with an exchange in flight resolves only once that exchange is on disk, so a caller may remove the
// capture folder at once (the warm-up does). Loopback only; a capture folder of its own.

import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readCaptures } from '../../src/capture/capture-reader.js';
import { createProxy } from '../../src/proxy/create-proxy.js';
import { agentConversation } from '../../src/sim/agent-conversation.js';

const files = (dir: string) => {
  try {
    return readdirSync(dir).sort();
  } catch {
    return [];
  }
};

describe('close() with an exchange in flight', () => {
  // The start-up warm-up closes its throwaway proxy this way when it passes its time limit, then removes the
  // capture folder: anything written after close() resolves comes back as a folder left in TMPDIR.
  it('resolves only once that exchange is recorded: nothing is written to the capture folder after it', async () => {
    let got!: () => void;
    const received = new Promise<void>((r) => (got = r));
    // Reads the request and streams an answer slowly: the exchange is in flight when close() is called.
    const upstream = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write('event: ping\ndata: {"type":"ping"}\n\n');
        got();
      });
      const timer = setInterval(() => res.write('event: ping\ndata: {"type":"ping"}\n\n'), 20);
      res.on('close', () => clearInterval(timer));
    });
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', () => r()));
    const home = mkdtempSync(join(tmpdir(), 'cacheward-close-'));
    const dir = join(home, 'captures');
    const port = (upstream.address() as AddressInfo).port;
    const p = createProxy({ upstream: `http://127.0.0.1:${port}`, dir, capture: 'full', logger: {} });
    await p.listen();
    try {
      const answer = fetch(`${p.url}/v1/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': 'k' },
        body: JSON.stringify({ ...agentConversation({ turns: 2, seed: 3 }), stream: true }),
      }).then(
        (res) => res.arrayBuffer(),
        (err: Error) => err,
      );
      await received;
      await p.close();
      // When close() resolves, the exchange is already on disk: there is nothing left to write after it.
      const atClose = files(dir).map((f) => [f, statSync(join(dir, f)).size]);
      const records = [];
      for await (const r of readCaptures([dir])) records.push(r.record);
      expect(records).toHaveLength(1);
      expect(records[0]?.route).toBe('/v1/messages');
      // And once the client has its answer (or its error), the folder is still as close() left it.
      await answer;
      expect(files(dir).map((f) => [f, statSync(join(dir, f)).size])).toEqual(atClose);
    } finally {
      upstream.closeAllConnections();
      upstream.close();
      rmSync(home, { recursive: true, force: true });
    }
  });
});
