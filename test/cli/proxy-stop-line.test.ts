import { mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, describe, expect, it } from 'vitest';
import { agentConversation } from '../../src/sim/agent-conversation.js';
import { createSimulator } from '../../src/sim/simulator.js';
import { startCliProxy } from '../proxy/cli-proxy.js';
import { cli } from './run-cli.js';

const sim = createSimulator();
const simUrl = await sim.listen();
afterAll(() => sim.close());

async function stopped(dir: string, requests: number): Promise<string> {
  const p = await startCliProxy(['--upstream', simUrl, '--dir', dir, '--no-warm-up']);
  const client = new Anthropic({ apiKey: 'sk-test-stop', baseURL: p.url });
  for (let i = 0; i < requests; i++)
    await client.messages.create({
      model: 'claude-sonnet-4-6',
      max_tokens: 16,
      messages: [{ role: 'user', content: `question ${i}` }],
    });
  p.child.kill('SIGTERM');
  await p.exited;
  return p.stderr.find((l) => l.startsWith('cacheward proxy: stopped;')) ?? '';
}

describe("cacheward proxy's stop line", () => {
  it("names this proxy's own files, not the folder's earlier captures, and says 1 exchange", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cacheward-stop-line-'));
    await stopped(dir, 2);
    const earlier = readdirSync(dir).filter((n) => n.endsWith('.jsonl'));
    expect(earlier).toHaveLength(1);
    const line = await stopped(dir, 1);
    const mine = readdirSync(dir).filter((n) => n.endsWith('.jsonl') && !earlier.includes(n));
    expect(mine).toHaveLength(1);
    expect(line).toBe(
      `cacheward proxy: stopped; 1 exchange captured in ${dir}. Report on them: cacheward report ${join(dir, mine[0] as string)}`,
    );
    // The command it gives reports on that one exchange.
    const report = await cli(['report', join(dir, mine[0] as string)]);
    expect(report.code).toBe(0);
    expect(report.stdout).toMatch(/1 session, 1 request\b/);
    // One request: nothing was there to read, and the report does not claim every turn read its cache.
    expect(report.stdout).toContain('no session has a second request yet, to read what the first cached');
  });

  it('a session whose second request read the first: every turn read what the one before it cached', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cacheward-stop-line-'));
    const p = await startCliProxy(['--upstream', simUrl, '--dir', dir, '--no-warm-up']);
    const client = new Anthropic({ apiKey: 'sk-test-stop', baseURL: p.url });
    // The same request twice (a retry): the second reads all the first wrote.
    const body = agentConversation({
      turns: 2,
      seed: 9,
      cacheLast: true,
    }) as unknown as Anthropic.MessageCreateParamsNonStreaming;
    for (let i = 0; i < 2; i++) await client.messages.create({ ...body, stream: false });
    p.child.kill('SIGTERM');
    await p.exited;
    const report = await cli(['report', dir]);
    expect(report.stdout).toMatch(/1 session, 2 requests/);
    expect(report.stdout).toContain('every turn read what the one before it cached');
  });

  it('says nothing was captured, with no report command that would fail', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cacheward-stop-line-'));
    writeFileSync(join(dir, 'notes.txt'), 'not a capture\n');
    expect(await stopped(dir, 0)).toBe(`cacheward proxy: stopped; nothing captured in ${dir}.`);
  });
});

describe("cacheward proxy's stop line on a full disk", () => {
  it('says how many exchanges were not captured, and that no report can count them', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cacheward-stop-line-'));
    // A zero file-size limit: every write fails (EFBIG), as on a disk that stays full until the stop.
    const p = await startCliProxy(['--upstream', simUrl, '--dir', dir, '--no-warm-up'], {
      shellPrefix: 'ulimit -f 0;',
    });
    const client = new Anthropic({ apiKey: 'sk-test-stop', baseURL: p.url, maxRetries: 0 });
    for (let i = 0; i < 3; i++)
      await client.messages.create({
        model: 'claude-sonnet-4-6',
        max_tokens: 16,
        messages: [{ role: 'user', content: `question ${i}` }],
      });
    // Each answered request's record is tried (and fails) just after it: wait for the third.
    let failed = 0;
    do
      failed = ((await (await fetch(`${p.url}/_cacheward/health`)).json()) as { capture: { failed: number } })
        .capture.failed;
    while (failed < 3);
    p.child.kill('SIGTERM');
    await p.exited;
    const line = p.stderr.find((l) => l.startsWith('cacheward proxy: stopped;')) ?? '';
    expect(line).toMatch(
      new RegExp(
        `^cacheward proxy: stopped; nothing captured in ${dir}\\. 3 exchanges were not captured \\(last error: EFBIG: .*\\); the files hold no mark of them, so a report cannot count them\\.$`,
      ),
    );
    expect(readdirSync(dir)).toEqual([]);
  });
});
