import { mkdtempSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readCaptures } from '../../src/capture/capture-reader.js';
import { type Fix, FixRegistry, runFixes, UnknownFixError } from '../../src/fixes/fix.js';
import { ttlFix } from '../../src/fixes/ttl.js';
import { parsePrefix } from '../../src/prefix/build-prefix.js';
import { createProxy } from '../../src/proxy/create-proxy.js';

const body = JSON.stringify({
  model: 'claude-opus-5',
  max_tokens: 5,
  messages: [{ role: 'user', content: 'hello' }],
});

/** A fix that upper-cases the first message and adds a beta header; counts calls in its state. */
const shout: Fix<number> = {
  name: 'shout',
  description: 'test fix',
  initialState: () => 0,
  apply(req, state) {
    const value = JSON.parse(req.body.toString()) as { messages: Array<{ content: string }> };
    value.messages[0]!.content = value.messages[0]!.content.toUpperCase();
    return {
      patches: [{ start: 0, end: req.body.length, text: JSON.stringify(value) }],
      headers: { 'anthropic-beta': 'shouting-1' },
      state: state + 1,
      notes: ['upper-cased message 0'],
    };
  },
};
const broken: Fix<null> = {
  name: 'broken',
  description: 'always throws',
  initialState: () => null,
  apply() {
    throw new Error('boom');
  },
};

describe('runFixes', () => {
  const prefix = parsePrefix(body, { format: 'anthropic-messages' });
  const ctx = {
    provider: 'anthropic' as const,
    route: '/v1/messages',
    now: 0,
    conversation: 'c-1',
    relation: 'new' as const,
  };
  const reparse = (b: Buffer) => parsePrefix(b, { format: 'anthropic-messages' });

  it('applies fixes in order, with their notes, states and header changes', () => {
    const out = runFixes([shout], { body: Buffer.from(body), prefix, headers: {} }, new Map(), ctx, reparse);
    expect(out.changed).toBe(true);
    expect(out.body.toString()).toContain('HELLO');
    expect(out.headers['anthropic-beta']).toBe('shouting-1');
    const whole = Buffer.byteLength(body);
    expect(out.notes).toEqual([
      { fix: 'shout', changed: true, notes: ['upper-cased message 0'], patches: [[0, whole, whole]] },
    ]);
    expect(out.edits).toEqual([{ start: 0, end: whole, at: 0, length: whole }]);
    expect(out.states.get('shout')).toBe(1);
  });

  it('fails open: one throwing fix means the original bytes and headers go out, and says so', () => {
    const states = new Map<string, unknown>([['shout', 5]]);
    const out = runFixes(
      [shout, broken],
      { body: Buffer.from(body), prefix, headers: { 'anthropic-beta': 'x' } },
      states,
      ctx,
      reparse,
    );
    expect(out.changed).toBe(false);
    expect(out.body.toString()).toBe(body);
    expect(out.headers).toEqual({ 'anthropic-beta': 'x' });
    expect(out.notes).toEqual([
      {
        fix: 'broken',
        changed: false,
        notes: ['failed: the original request was forwarded untouched'],
        error: 'Error: boom',
      },
    ]);
    expect(out.states.get('shout')).toBe(5);
  });

  it('names unknown fixes and the known ones', () => {
    const registry = new FixRegistry().register(shout as Fix);
    expect(() => registry.resolve(['nope'])).toThrow(UnknownFixError);
    expect(() => registry.resolve(['nope'])).toThrow(/known fixes: shout/);
  });
});

describe('fixes in the proxy', () => {
  async function echoUpstream() {
    const seen: Array<{ body: string; beta: string | undefined }> = [];
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c) => chunks.push(c));
      req.on('end', () => {
        seen.push({
          body: Buffer.concat(chunks).toString(),
          beta: req.headers['anthropic-beta'] as string | undefined,
        });
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"id":"msg_1","type":"message","usage":{"input_tokens":1,"output_tokens":1}}');
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    return {
      url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      seen,
      close: () => server.close(),
    };
  }

  it.each([
    ['a fix that changes the body', [shout], 'HELLO', 'shouting-1'],
    ['a fix that throws', [shout, broken], 'hello', undefined],
  ])(
    '%s: the upstream gets what the pipeline decided, and the capture says why',
    async (_name, fixes, expected, beta) => {
      const up = await echoUpstream();
      const dir = mkdtempSync(join(tmpdir(), 'cacheward-fix-'));
      const logs: string[] = [];
      const p = createProxy({
        upstream: up.url,
        dir,
        capture: 'full',
        fixes: fixes as Fix[],
        logger: { warn: (l) => logs.push(l) },
      });
      await p.listen();
      try {
        const res = await fetch(`${p.url}/v1/messages`, {
          method: 'POST',
          headers: { 'x-api-key': 'k', 'content-type': 'application/json' },
          body,
        });
        expect(res.status).toBe(200);
        await res.text();
        expect(up.seen[0]?.body).toContain(expected);
        expect(up.seen[0]?.beta).toBe(beta);
        await p.flush();
        const recs = [];
        for await (const r of readCaptures([dir])) recs.push(r);
        const r = recs[0]!;
        if (expected === 'HELLO') {
          expect(r.body?.toString()).toContain('HELLO');
          expect(r.clientBody?.toString()).toBe(body);
          expect(r.record.fixes[0]).toMatchObject({ fix: 'shout', changed: true });
        } else {
          expect(r.body?.toString()).toBe(body);
          expect(r.clientBody).toBeUndefined();
          expect(r.record.fixes[0]).toMatchObject({ fix: 'broken', error: 'Error: boom' });
          expect(logs.some((l) => l.includes('fix broken failed'))).toBe(true);
        }
      } finally {
        await p.close();
        up.close();
      }
    },
  );

  it('forwards a body the fixes cannot parse untouched', async () => {
    const up = await echoUpstream();
    const dir = mkdtempSync(join(tmpdir(), 'cacheward-fix-bad-'));
    const p = createProxy({ upstream: up.url, dir, fixes: [shout as Fix], logger: {} });
    await p.listen();
    try {
      const bad = '{"model": oops';
      const res = await fetch(`${p.url}/v1/messages`, {
        method: 'POST',
        headers: { 'x-api-key': 'k' },
        body: bad,
      });
      await res.text();
      expect(up.seen[0]?.body).toBe(bad);
    } finally {
      await p.close();
      up.close();
    }
  });

  it.each([
    ['with its length declared', false],
    ['sent chunked', true],
  ])(
    'reads a large body whole %s: the fix sees, and the capture keeps, the very bytes sent',
    async (_n, chunked) => {
      const up = await echoUpstream();
      const dir = mkdtempSync(join(tmpdir(), 'cacheward-fix-large-'));
      const p = createProxy({ upstream: up.url, dir, capture: 'full', fixes: [shout as Fix], logger: {} });
      await p.listen();
      try {
        const words = Array.from({ length: 90_000 }, (_, i) => `w${(i * 7919) % 100_003}`).join(' ');
        const large = JSON.stringify({
          model: 'claude-opus-5',
          max_tokens: 5,
          messages: [{ role: 'user', content: words }],
        });
        expect(large.length).toBeGreaterThan(600_000);
        const bytes = Buffer.from(large);
        // Chunked: no content-length, the body in uneven pieces (the proxy cannot size it up front).
        const send = chunked
          ? new ReadableStream<Uint8Array>({
              start(c) {
                for (let at = 0; at < bytes.length; at += 50_001) c.enqueue(bytes.subarray(at, at + 50_001));
                c.close();
              },
            })
          : large;
        const res = await fetch(`${p.url}/v1/messages`, {
          method: 'POST',
          headers: { 'x-api-key': 'k', 'content-type': 'application/json' },
          body: send,
          ...(chunked ? { duplex: 'half' } : {}),
        } as RequestInit);
        expect(res.status).toBe(200);
        await res.text();
        expect(up.seen[0]?.body).toBe(
          JSON.stringify({
            ...JSON.parse(large),
            messages: [{ role: 'user', content: words.toUpperCase() }],
          }),
        );
        await p.flush();
        const recs = [];
        for await (const r of readCaptures([dir])) recs.push(r);
        expect(recs[0]?.clientBody?.equals(bytes)).toBe(true);
      } finally {
        await p.close();
        up.close();
      }
    },
  );

  it("takes a fix's options in its own object: ttlFix('5m') runs where ttl runs, first named or not", async () => {
    const up = await echoUpstream();
    const dir = mkdtempSync(join(tmpdir(), 'cacheward-fix-ttl-'));
    const p = createProxy({ upstream: up.url, dir, fixes: [ttlFix('5m'), 'tools-sort'], logger: {} });
    await p.listen();
    try {
      expect(p.health().fixes).toEqual(['tools-sort', 'ttl']);
      const withTtl = JSON.stringify({
        model: 'claude-opus-5',
        max_tokens: 5,
        system: [{ type: 'text', text: 'sys', cache_control: { type: 'ephemeral', ttl: '1h' } }],
        messages: [{ role: 'user', content: 'hello' }],
      });
      const res = await fetch(`${p.url}/v1/messages`, {
        method: 'POST',
        headers: { 'x-api-key': 'k', 'content-type': 'application/json' },
        body: withTtl,
      });
      await res.text();
      expect(JSON.parse(up.seen[0]?.body ?? '{}').system[0].cache_control).toEqual({
        type: 'ephemeral',
        ttl: '5m',
      });
    } finally {
      await p.close();
      up.close();
    }
  });
});
