// strip-billing-header: Claude Code's per-request billing line busts a gateway that caches by raw prefix;
// the fix cuts it out byte-exactly, in the pipeline the proxy and the replay gate share.

import { mkdtempSync } from 'node:fs';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, describe, expect, it } from 'vitest';
import { applyPatches } from '../../src/fixes/byte-patch.js';
import { fixRegistry } from '../../src/fixes/registry.js';
import { stripBillingHeader } from '../../src/fixes/strip-billing-header.js';
import { parsePrefix } from '../../src/prefix/build-prefix.js';
import { createProxy } from '../../src/proxy/create-proxy.js';

type Json = Record<string, unknown>;
const line = (cch: string) =>
  `x-anthropic-billing-header: cc_version=2.1.14.e3f; cc_entrypoint=cli; cch=${cch};`;
const ctx = {
  provider: 'anthropic' as const,
  route: '/v1/messages',
  now: 0,
  conversation: 'c',
  relation: 'new' as const,
};

function claudeCode(cch: string, question = 'fix the bug'): Json {
  return {
    model: 'claude-opus-5',
    max_tokens: 32,
    system: [
      { type: 'text', text: line(cch) },
      { type: 'text', text: 'You are Claude Code.', cache_control: { type: 'ephemeral' } },
    ],
    messages: [{ role: 'user', content: question }],
  };
}

/** The fix's result, with the body its patches make. */
const apply = (text: string) => {
  const out = stripBillingHeader.apply(
    { body: Buffer.from(text), prefix: parsePrefix(text, { format: 'anthropic-messages' }), headers: {} },
    null,
    ctx,
  );
  return { ...out, body: out.patches ? applyPatches(Buffer.from(text), out.patches) : undefined };
};

/** Length of the common byte prefix: what a raw-prefix cache can reuse. */
function shared(a: Buffer, b: Buffer): number {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}

describe('strip-billing-header', () => {
  it('cuts the line and its comma out, leaving every other byte as sent', () => {
    for (const text of [JSON.stringify(claudeCode('a1b2c')), JSON.stringify(claudeCode('a1b2c'), null, 2)]) {
      const out = apply(text);
      expect(out.notes).toEqual(["removed Claude Code's billing line from system[0]"]);
      expect(out.changes).toEqual([
        { kind: 'system', detail: 'billing line (x-anthropic-billing-header) removed from system[0]' },
      ]);
      const body = out.body?.toString() ?? '';
      const value = JSON.parse(body) as Json;
      expect(value.system).toEqual([
        { type: 'text', text: 'You are Claude Code.', cache_control: { type: 'ephemeral' } },
      ]);
      const { system: _a, ...restIn } = JSON.parse(text) as Json;
      const { system: _b, ...restOut } = value;
      expect(restOut).toEqual(restIn);
      // Byte-exact: the output is the input minus one contiguous slice.
      const cut = text.length - body.length;
      const at = shared(Buffer.from(text), Buffer.from(body));
      expect(text.slice(0, at) + text.slice(at + cut)).toBe(body);
      expect(text.slice(at, at + cut)).toContain('x-anthropic-billing-header');
    }
  });

  it('leaves `[]` when the line is the only system block, and changes nothing without one', () => {
    const only = JSON.stringify({ ...claudeCode('1'), system: [{ type: 'text', text: line('1') }] });
    expect(JSON.parse(apply(only).body?.toString() ?? '').system).toEqual([]);
    const none = apply(JSON.stringify({ ...claudeCode('1'), system: 'You are Claude Code.' }));
    expect(none).toEqual({ state: null, notes: [] });
  });

  it('gives a raw-prefix cache the same bytes on every turn', () => {
    const a = apply(JSON.stringify(claudeCode('a1b2c'))).body as Buffer;
    const b = apply(JSON.stringify(claudeCode('ffff0', 'fix the bug, then run the tests'))).body as Buffer;
    // Without the fix the bodies part ways inside system[0]; with it, only at the new user text.
    const raw = shared(
      Buffer.from(JSON.stringify(claudeCode('a1b2c'))),
      Buffer.from(JSON.stringify(claudeCode('ffff0'))),
    );
    expect(raw).toBeLessThan(JSON.stringify(claudeCode('x')).indexOf('You are Claude Code'));
    expect(shared(a, b)).toBe(a.indexOf('fix the bug') + 'fix the bug'.length);
  });

  it('is registered under its name', () => {
    expect(fixRegistry().resolve(['strip-billing-header'])[0]).toBe(stripBillingHeader);
  });
});

describe('strip-billing-header through the proxy, in front of a raw-prefix gateway', () => {
  it('forwards each Claude Code request without its billing line', async () => {
    const received: Buffer[] = [];
    const gateway = createServer(async (req: IncomingMessage, res) => {
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      received.push(Buffer.concat(chunks));
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          id: `msg_${received.length}`,
          type: 'message',
          role: 'assistant',
          model: 'claude-opus-5',
          content: [{ type: 'text', text: 'ok' }],
          stop_reason: 'end_turn',
          stop_sequence: null,
          usage: { input_tokens: 10, output_tokens: 1 },
        }),
      );
    });
    await new Promise<void>((r) => gateway.listen(0, '127.0.0.1', r));
    const port = (gateway.address() as AddressInfo).port;
    const proxy = createProxy({
      upstream: `http://127.0.0.1:${port}`,
      dir: join(mkdtempSync(join(tmpdir(), 'cacheward-strip-')), 'captures'),
      capture: 'hashes',
      fixes: ['strip-billing-header'],
      logger: {},
    });
    await proxy.listen();
    afterAll(async () => {
      await proxy.close();
      await new Promise<void>((r) => gateway.close(() => r()));
    });
    const client = new Anthropic({
      apiKey: 'cacheward-test-key-0123456789',
      baseURL: proxy.url,
      maxRetries: 0,
    });
    await client.messages.create(claudeCode('a1b2c') as never);
    await client.messages.create(claudeCode('ffff0') as never);
    expect(received).toHaveLength(2);
    for (const body of received) expect(body.toString()).not.toContain('x-anthropic-billing-header');
    expect(received[0]?.equals(received[1] as Buffer)).toBe(true);
  });
});
