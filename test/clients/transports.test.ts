// Every transport the real agents use, offline: Codex on its Responses WebSocket through `cacheward proxy`
// and `cacheward run --sim` (no fallback to HTTP), its analysis the same as over HTTP; the newest Claude
// Code through `cacheward run --sim` in forward mode (HTTPS_PROXY and the local CA, its base URL never set),
// captured as in base-URL mode, with a test client's CONNECT to another host tunneled byte for byte.

import { chmodSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { PriceTable } from '../../src/analyze/price-table.js';
import { type ReadRecord, readCaptures } from '../../src/capture/capture-reader.js';
import { analyzePaths } from '../../src/report/analyze-paths.js';
import { claudeCommand, codexCommand, startAgentStack } from './agent-harness.js';
import { script as codexScript } from './codex-scenarios.js';
import { type CliResult, cacheward } from './transcript-parity.js';

type Json = Record<string, any>;
const TEST_MS = 150_000;

/** Codex's EDIT-TASK through `cacheward proxy` into `cacheward sim`, over HTTP or its WebSocket. */
async function codexEdit(websocket: boolean) {
  const stack = await startAgentStack({ script: codexScript });
  try {
    const cwd = join(stack.workDir, 'edit');
    mkdirSync(cwd);
    writeFileSync(join(cwd, 'a.txt'), 'hello\n');
    const run = await stack.run('codex', {
      prompt: 'EDIT-TASK patch a.txt',
      cwd,
      args: ['-s', 'workspace-write'],
      websocket,
    });
    const records = await stack.records();
    const analysis = await analyzePaths([stack.captureDir], { prices: new PriceTable() });
    return { run, records, analysis, patched: readFileSync(join(cwd, 'a.txt'), 'utf8') };
  } finally {
    await stack.close();
  }
}

/** A generating request as the analysis sees it: its whole prefix, sizes and place in the conversation. */
const turnOf = (r: ReadRecord) => ({
  // Keys differ between two sessions (the session id is the prompt_cache_key, the folders differ):
  // the blocks' levels, kinds and sizes are what must be the same. A tool's output says how long the tool
  // took ("Wall time: 0.1 seconds"), so its size may differ by a token between two runs: its kind counts.
  blocks: r.record.prefix?.blocks.map((b) =>
    b.kind.endsWith('_output') ? `${b.level}:${b.kind}` : `${b.level}:${b.kind}:${b.tokens}`,
  ),

  output: r.record.usage?.normalized?.output,
  relation: r.record.conversation?.relation,
});

describe('Codex on its Responses WebSocket', () => {
  it(
    'goes through cacheward proxy with no fallback, and its analysis equals the one over HTTP',
    async () => {
      const http = await codexEdit(false);
      const ws = await codexEdit(true);
      for (const r of [http, ws]) {
        expect(r.run.exitCode, r.run.stderr).toBe(0);
        expect(r.run.stdout.trim()).toBe('Patched a.txt.');
        expect(r.patched).toBe('hello, patched\n');
      }
      expect(ws.run.stderr).not.toMatch(/Falling back from WebSockets|Reconnecting/);
      expect(http.records.every((r) => r.record.transport === undefined)).toBe(true);
      expect(ws.records.every((r) => r.record.transport === 'websocket')).toBe(true);
      // Over the socket Codex first warms up (generate: false, no output), then chains each request on the
      // last response with only its new items; made whole, each is the request it sends over HTTP.
      const [warmUp, ...turns] = ws.records;
      expect(JSON.parse(String(warmUp?.body)).generate).toBe(false);
      expect(warmUp?.record.usage?.normalized?.output).toBe(0);
      expect(turns.map((r) => r.record.chain?.context)).toEqual(['known', 'known']);
      expect(turns.map(turnOf)).toEqual(http.records.map((r) => ({ ...turnOf(r), relation: 'continues' })));
      const input = (r: ReadRecord) => r.record.usage?.normalized?.inputTotal ?? 0;
      for (const [i, r] of turns.entries())
        expect(Math.abs(input(r) - input(http.records[i] as ReadRecord))).toBeLessThanOrEqual(4);
      // The same causes; the warm-up is one more request, the cold start of the conversation.
      const causes = (a: typeof http.analysis) => a.byCause.map((c) => [c.cause, c.misses]);
      expect(causes(ws.analysis)).toEqual(causes(http.analysis));
      expect(ws.analysis.totals.requests).toBe(http.analysis.totals.requests + 1);
      expect(ws.analysis.totals.outputTokens).toBe(http.analysis.totals.outputTokens);
    },
    TEST_MS,
  );

  it(
    'goes through cacheward run --sim on its WebSocket, and the summary says so',
    async () => {
      const r = await runCli(['--', ...codexCommand(), 'exec', '--skip-git-repo-check', 'Say hi.']);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toMatch(/Simulated reply \d+\./);
      expect(r.stderr).not.toMatch(/Falling back from WebSockets|Reconnecting/);
      expect(r.stderr).toMatch(/its base URL \(Responses over WebSocket\)/);
      expect(r.stderr).toMatch(/transport: base URL .*; 2 responses over 1 WebSocket/);
    },
    TEST_MS,
  );
});

const claudeScript = {
  conversations: [
    {
      match: 'FWD-TASK',
      turns: [
        { text: 'Listing.', tool_calls: [{ name: 'Bash', input: { command: 'ls', description: 'list' } }] },
        { text: 'Forward done.' },
      ],
    },
  ],
};

describe('Claude Code through the forward proxy', async () => {
  // A TCP echo server: what a test client sends through a tunnel comes back.
  const echo = createServer((s) => s.pipe(s));
  await new Promise<void>((r) => echo.listen(0, '127.0.0.1', () => r()));
  afterAll(() => new Promise((r) => echo.close(r)));
  const echoPort = (echo.address() as { port: number }).port;

  it(
    'runs with HTTPS_PROXY and the CA, its base URL never set; captured as in base-URL mode; a CONNECT elsewhere tunneled byte for byte',
    async () => {
      const forward = await runClaude([]);
      const base = await runClaude(['--base-url']);
      for (const r of [forward, base]) {
        expect(r.code, r.stderr).toBe(0);
        expect(r.stdout.trim()).toBe('Forward done.');
      }
      // What Claude Code saw: the proxy and the CA, no base URL.
      expect(forward.env.ANTHROPIC_BASE_URL).toBeUndefined();
      expect(forward.env.HTTPS_PROXY).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(readFileSync(forward.env.NODE_EXTRA_CA_CERTS as string, 'utf8')).toMatch(/BEGIN CERTIFICATE/);
      expect(base.env.ANTHROPIC_BASE_URL).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      // In base-URL mode HTTPS_PROXY is --sim's egress guard (it refuses what leaves the base URL), not the proxy.
      expect(base.env.HTTPS_PROXY).not.toBe(base.env.ANTHROPIC_BASE_URL);
      expect(forward.stderr).toMatch(/transport: forward proxy/);
      expect(base.stderr).toMatch(/transport: base URL/);
      // The test client's bytes came back through the tunnel unchanged.
      expect(forward.tunnel).toBe('tunnel ok');

      // The same requests and conversations, the same tools, the same report. The bodies are not the same
      // bytes, by Claude Code's own doing: talking to its real host it sends cache `diagnostics`, a longer
      // billing line and one more system block, which a custom base URL switches off (docs/transports.md).
      const same = (r: ReadRecord) => ({
        route: r.record.route,
        status: r.record.status,
        model: r.record.model,
        tools: r.record.prefix?.blocks.filter((b) => b.level === 'tools').map((b) => b.name),
        relation: r.record.conversation?.relation,
        turn: r.record.conversation?.turn,
        outcome: r.record.outcome,
      });
      expect(forward.records.length).toBeGreaterThanOrEqual(2);
      expect(forward.records.map(same)).toEqual(base.records.map(same));
      const bodies = (r: typeof forward) => r.records.map((x) => JSON.parse(String(x.body)) as Json);
      expect(bodies(forward).every((b) => 'diagnostics' in b)).toBe(true);
      expect(bodies(base).some((b) => 'diagnostics' in b)).toBe(false);
      // Each later turn read the whole prefix before it, in both modes.
      for (const r of [forward, base]) {
        const [first, second] = r.records.map((x) => x.record.usage?.normalized);
        expect(second?.cacheRead).toBe(first?.inputTotal);
      }
      const report = (a: Awaited<ReturnType<typeof analyzePaths>>) => ({
        sessions: a.totals.sessions,
        requests: a.totals.requests,
        causes: a.byCause.map((c) => [c.cause, c.misses]),
        hitRate: Number(a.totals.hitRate?.toFixed(2)),
      });
      expect(report(forward.analysis)).toEqual(report(base.analysis));
    },
    TEST_MS,
  );

  /** `cacheward run --sim` of Claude Code through a wrapper named `claude` that records its environment. */
  async function runClaude(flags: string[]) {
    const root = mkdtempSync(join(tmpdir(), 'cacheward-fwd-claude-'));
    const bin = join(root, 'bin');
    mkdirSync(bin);
    mkdirSync(join(root, 'work'));
    const envFile = join(root, 'env.json');
    const tunnelFile = join(root, 'tunnel.txt');
    const client = join(root, 'tunnel-client.mjs');
    writeFileSync(client, TUNNEL_CLIENT);
    const wrapper = join(bin, 'claude');
    writeFileSync(
      wrapper,
      `#!/bin/sh\n"${process.execPath}" -e 'require("fs").writeFileSync(process.argv[1], JSON.stringify(process.env))' "${envFile}"\n` +
        `[ -n "$HTTPS_PROXY" ] && "${process.execPath}" "${client}" "$HTTPS_PROXY" ${echoPort} "${tunnelFile}"\n` +
        `exec "${claudeCommand()[0]}" "$@"\n`,
    );
    chmodSync(wrapper, 0o755);
    const scriptFile = join(root, 'script.json');
    writeFileSync(scriptFile, JSON.stringify(claudeScript));
    const r = await runCli(
      [
        ...flags,
        '--script',
        scriptFile,
        '--',
        wrapper,
        '-p',
        'FWD-TASK list the files',
        '--allowedTools',
        'Bash',
      ],
      root,
    );
    const records: ReadRecord[] = [];
    for await (const rec of readCaptures([join(root, 'captures')])) records.push(rec);
    const analysis = await analyzePaths([join(root, 'captures')], { prices: new PriceTable() });
    let tunnel = '';
    try {
      tunnel = readFileSync(tunnelFile, 'utf8');
    } catch {}
    return { ...r, env: JSON.parse(readFileSync(envFile, 'utf8')) as Json, records, analysis, tunnel };
  }
});

/** Opens a CONNECT tunnel through the proxy to a loopback echo server and checks 256 KB come back as sent. */
const TUNNEL_CLIENT = `
import { connect } from 'node:net';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
const [proxy, port, out] = process.argv.slice(2);
const u = new URL(proxy);
const s = connect(Number(u.port), u.hostname, () => s.write('CONNECT 127.0.0.1:' + port + ' HTTP/1.1\\r\\nHost: 127.0.0.1:' + port + '\\r\\n\\r\\n'));
const sent = randomBytes(256 * 1024);
let head = Buffer.alloc(0); let open = false; const back = [];
s.on('data', (d) => {
  if (!open) {
    head = Buffer.concat([head, d]);
    const end = head.indexOf('\\r\\n\\r\\n');
    if (end < 0) return;
    if (!head.subarray(0, 12).toString().includes('200')) { writeFileSync(out, 'refused: ' + head.toString()); process.exit(0); }
    open = true; if (head.length > end + 4) back.push(head.subarray(end + 4));
    s.write(sent); return;
  }
  back.push(d);
  if (Buffer.concat(back).length >= sent.length) {
    writeFileSync(out, Buffer.concat(back).equals(sent) ? 'tunnel ok' : 'tunnel altered'); s.destroy();
  }
});
s.on('error', (e) => writeFileSync(out, 'error: ' + e.message));
`;

/** `cacheward run --sim ARGS` with a bare environment (fresh HOME and state folder, no keys). */
function runCli(
  args: string[],
  root = mkdtempSync(join(tmpdir(), 'cacheward-run-transport-')),
): Promise<CliResult> {
  const home = join(root, 'home');
  mkdirSync(home, { recursive: true, mode: 0o700 });
  mkdirSync(join(root, 'work'), { recursive: true });
  return cacheward(
    ['run', '--sim', '--no-warm-up', '--capture', 'full', '--dir', join(root, 'captures'), ...args],
    { HOME: home, TERM: 'dumb' },
    { cwd: join(root, 'work'), timeoutMs: 120_000 },
  );
}
