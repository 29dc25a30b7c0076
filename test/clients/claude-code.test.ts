// The real Claude Code CLI (`claude -p`), newest and pinned, offline: through `cacheward proxy` into
// `cacheward sim --script`. A tool loop, `--continue`, a general-purpose subagent, and a growing MCP server.

import { appendFileSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ReadRecord } from '../../src/capture/capture-reader.js';
import { type AgentStack, type ClaudeVersion, startAgentStack } from './agent-harness.js';
import { dir, mcpFixture, script } from './claude-scenarios.js';

type Json = Record<string, any>;

const TEST_MS = 150_000;

const body = (r: ReadRecord): Json => JSON.parse(String(r.body));
const firstUserText = (b: Json): string =>
  (b.messages as Json[])
    .filter((m) => m.role === 'user')[0]
    ?.content.map((c: Json) => c.text ?? '')
    .join('\n') ?? '';
const billing = (b: Json): string => String((b.system as Json[])[0]?.text);
const toolNames = (b: Json): string[] => (b.tools as Json[]).map((t) => t.name);
const toolResults = (b: Json): Json[] =>
  (b.messages as Json[]).flatMap((m) =>
    Array.isArray(m.content) ? m.content.filter((c: Json) => c.type === 'tool_result') : [],
  );
const resultText = (r: Json): string =>
  typeof r.content === 'string' ? r.content : r.content.map((c: Json) => c.text).join('\n');

/** The records of the conversation whose first user message holds `word`, in order. */
async function conversation(stack: AgentStack, word: string): Promise<Json[]> {
  return (await stack.records()).map(body).filter((b) => firstUserText(b).includes(word));
}

function mcpMessages(log: string): Json[] {
  return readFileSync(log, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l));
}

describe.each<ClaudeVersion>(['newest', 'pinned'])(
  'Claude Code (%s) through the proxy into the simulator',
  (claude) => {
    let stack: AgentStack;
    beforeAll(async () => {
      stack = await startAgentStack({ script });
    }, 30_000);
    afterAll(() => stack?.close());

    it(
      'runs a tool loop: Read, Bash and Write on files in its working directory',
      async () => {
        const cwd = dir(stack, 'loop');
        writeFileSync(join(cwd, 'notes.txt'), 'the secret is 42\n');
        const run = await stack.run('claude', {
          claude,
          prompt: 'LOOP-TASK read, count and write',
          cwd,
          args: ['--allowedTools', 'Read', 'Bash(wc:*)', 'Write'],
        });
        expect(run.exitCode).toBe(0);
        expect(run.stdout.trim()).toBe('Loop done.');
        expect(readFileSync(join(cwd, 'out.txt'), 'utf8')).toBe('looped\n');
        const reqs = await conversation(stack, 'LOOP-TASK');
        expect(reqs).toHaveLength(4);
        const results = toolResults(reqs[3] as Json).map(resultText);
        expect(results[0]).toContain('the secret is 42');
        expect(results[1]).toContain('17 notes.txt');
        expect(results[2]).toMatch(/File created successfully/);
        // The loop reads back what its first request wrote.
        expect(run.tokens.anthropic.written).toBeGreaterThan(0);
        expect(run.tokens.anthropic.read).toBeGreaterThan(run.tokens.anthropic.written);
        const records = (await stack.records()).filter((r) => firstUserText(body(r)).includes('LOOP-TASK'));
        const sessions = new Set(records.map((r) => r.record.headers['x-claude-code-session-id']));
        expect(sessions.size).toBe(1);
        expect(records.every((r) => r.record.session.source === 'claude-code')).toBe(true);
      },
      TEST_MS,
    );

    it(
      '`--continue` resumes the session: same session id, the old turns resent, the new prompt last',
      async () => {
        const cwd = dir(stack, 'resume');
        const first = await stack.run('claude', {
          claude,
          prompt: 'RESUME-TASK first question',
          cwd,
        });
        expect(first.exitCode).toBe(0);
        expect(first.stdout.trim()).toBe('First answer.');
        const second = await stack.run('claude', {
          claude,
          prompt: 'second question',
          cwd,
          args: ['--continue'],
        });
        expect(second.exitCode).toBe(0);
        expect(second.stdout.trim()).toBe('Resumed answer.');
        const records = (await stack.records()).filter((r) => firstUserText(body(r)).includes('RESUME-TASK'));
        expect(records).toHaveLength(2);
        const [a, b] = records as [ReadRecord, ReadRecord];
        expect(b.record.headers['x-claude-code-session-id']).toBe(
          a.record.headers['x-claude-code-session-id'],
        );
        const messages = body(b).messages as Json[];
        expect(messages.find((m) => m.role === 'assistant')?.content).toEqual([
          { type: 'text', text: 'First answer.' },
        ]);
        expect(JSON.stringify(messages.at(-1))).toContain('second question');
        expect(JSON.parse(body(b).metadata.user_id).session_id).toBe(
          a.record.headers['x-claude-code-session-id'],
        );
      },
      TEST_MS,
    );

    it(
      'starts a general-purpose subagent: its own system prompt and tools, under the same session id',
      async () => {
        const cwd = dir(stack, 'delegate');
        const run = await stack.run('claude', {
          claude,
          prompt: 'DELEGATE-TASK ask a subagent',
          cwd,
          args: ['--allowedTools', 'Agent'],
        });
        expect(run.exitCode).toBe(0);
        // The newest runs the subagent in the background: one more main-line turn when it reports.
        expect(run.stdout.trim()).toBe(
          claude === 'newest' ? 'Delegated: done.\n\nSubagent reported.' : 'Delegated: done.',
        );
        const mainLine = await conversation(stack, 'DELEGATE-TASK');
        expect(mainLine).toHaveLength(claude === 'newest' ? 3 : 2);
        const [main] = mainLine as [Json];
        const done = mainLine.at(-1) as Json;
        const [sub] = (await conversation(stack, 'SUBAGENT-TASK')) as [Json];
        expect(sub).toBeDefined();
        expect(billing(sub)).toContain('cc_is_subagent=true;');
        expect(billing(main)).not.toContain('cc_is_subagent');
        expect(JSON.stringify(sub.system.slice(1))).not.toBe(JSON.stringify(main.system.slice(1)));
        expect(toolNames(sub)).not.toEqual(toolNames(main));
        expect(JSON.parse(sub.metadata.user_id).session_id).toBe(
          JSON.parse(main.metadata.user_id).session_id,
        );
        expect(JSON.stringify(done.messages)).toContain('Subagent found 42.');
      },
      TEST_MS,
    );

    it.runIf(claude === 'pinned')(
      'sees an MCP server add a tool (notifications/tools/list_changed) and calls it',
      async () => {
        const cwd = dir(stack, 'grow');
        const log = join(stack.root, 'claude-mcp.log');
        appendFileSync(log, '');
        const run = await stack.run('claude', {
          claude,
          prompt: 'GROW-TASK grow the server',
          cwd,
          mcpServers: mcpFixture(log),
          args: ['--allowedTools', 'mcp__fixture__grow', 'mcp__fixture__lookup', 'mcp__fixture__extra_1'],
        });
        expect(run.exitCode).toBe(0);
        expect(run.stdout.trim()).toBe('Grown.');
        const received = mcpMessages(log);
        const calls = received.filter((m) => m.method === 'tools/call').map((m) => m.params.name);
        expect(calls).toEqual(['grow', 'lookup', 'extra_1']);
        expect(received.filter((m) => m.method === 'tools/list').length).toBeGreaterThanOrEqual(2);
        const reqs = await conversation(stack, 'GROW-TASK');
        expect(reqs).toHaveLength(4);
        expect(toolNames(reqs[0] as Json)).toEqual(
          expect.arrayContaining(['mcp__fixture__grow', 'mcp__fixture__lookup']),
        );
        expect(toolNames(reqs[0] as Json)).not.toContain('mcp__fixture__extra_1');
        expect(toolNames(reqs[3] as Json)).toContain('mcp__fixture__extra_1');
        const results = toolResults(reqs[3] as Json);
        expect(results.map(resultText)).toEqual([
          'added extra_1',
          expect.stringContaining('fixture definition of cache'),
          'extra_1 ran',
        ]);
      },
      TEST_MS,
    );

    it.runIf(claude === 'newest')(
      'loads MCP tools with ToolSearch, sees the server add one, and keeps its own tools[] unchanged',
      async () => {
        const cwd = dir(stack, 'search-grow');
        const log = join(stack.root, 'claude-search-mcp.log');
        appendFileSync(log, '');
        const run = await stack.run('claude', {
          claude,
          prompt: 'TOOLSEARCH-TASK grow the server',
          cwd,
          mcpServers: mcpFixture(log),
          args: [
            '--allowedTools',
            'ToolSearch',
            'mcp__fixture__grow',
            'mcp__fixture__lookup',
            'mcp__fixture__extra_1',
          ],
        });
        expect(run.exitCode).toBe(0);
        expect(run.stdout.trim()).toBe('Grown.');
        const calls = mcpMessages(log)
          .filter((m) => m.method === 'tools/call')
          .map((m) => m.params.name);
        expect(calls).toEqual(['grow', 'lookup', 'extra_1']);
        const reqs = await conversation(stack, 'TOOLSEARCH-TASK');
        expect(reqs).toHaveLength(6);
        // The client declares its own deferred placeholder and the beta for tool changes: its loaded MCP tools
        // join tools[] as deferred tools (outside the cached prefix), so the tools the cache sees never change.
        const cachedTools = reqs.map((b) =>
          JSON.stringify((b.tools as Json[]).filter((t) => !t.defer_loading)),
        );
        expect(new Set(cachedTools).size).toBe(1);
        expect(toolNames(reqs[0] as Json)).toContain('DeferredToolPlaceholder');
        expect(toolNames(reqs[0] as Json).some((n) => n.startsWith('mcp__'))).toBe(false);
        expect(toolNames(reqs[5] as Json)).toContain('mcp__fixture__extra_1');
        expect(run.tokens.anthropic.read).toBeGreaterThan(run.tokens.anthropic.written);
        expect(JSON.stringify((reqs[5] as Json).messages)).toContain('mcp__fixture__extra_1');
      },
      TEST_MS,
    );
  },
);

describe('Claude Code with fixes on', () => {
  let stack: AgentStack;
  beforeAll(async () => {
    stack = await startAgentStack({ script, fix: ['tools-freeze', 'pin-reminders'] });
  }, 30_000);
  afterAll(() => stack?.close());

  it(
    'completes the growing-MCP session through `--fix tools-freeze,pin-reminders`',
    async () => {
      const log = join(stack.root, 'claude-mcp.log');
      appendFileSync(log, '');
      const run = await stack.run('claude', {
        claude: 'pinned',
        prompt: 'GROW-TASK grow the server',
        cwd: dir(stack, 'grow'),
        mcpServers: mcpFixture(log),
        args: ['--allowedTools', 'mcp__fixture__grow', 'mcp__fixture__lookup', 'mcp__fixture__extra_1'],
      });
      expect(run.exitCode).toBe(0);
      expect(run.stdout.trim()).toBe('Grown.');
      expect(
        mcpMessages(log)
          .filter((m) => m.method === 'tools/call')
          .map((m) => m.params.name),
      ).toEqual(['grow', 'lookup', 'extra_1']);
      const records = await stack.records();
      expect(records).toHaveLength(4);
      expect(records.some((r) => r.record.fixes.some((f) => f.fix === 'tools-freeze' && f.changed))).toBe(
        true,
      );
      expect(run.simStats.anthropic.requests).toBe(4);
    },
    TEST_MS,
  );

  it(
    'the newest, with its own deferred tools and the beta: forwarded unchanged by tools-freeze (no second placeholder), to the end of its session',
    async () => {
      const log = join(stack.root, 'claude-newest-mcp.log');
      appendFileSync(log, '');
      const run = await stack.run('claude', {
        claude: 'newest',
        prompt: 'TOOLSEARCH-TASK grow the server',
        cwd: dir(stack, 'fixed-search'),
        mcpServers: mcpFixture(log),
        args: [
          '--allowedTools',
          'ToolSearch',
          'mcp__fixture__grow',
          'mcp__fixture__lookup',
          'mcp__fixture__extra_1',
        ],
      });
      expect(run.exitCode).toBe(0);
      expect(run.stdout.trim()).toBe('Grown.');
      expect(
        mcpMessages(log)
          .filter((m) => m.method === 'tools/call')
          .map((m) => m.params.name),
      ).toEqual(['grow', 'lookup', 'extra_1']);
      const records = (await stack.records()).filter((r) =>
        firstUserText(body(r)).includes('TOOLSEARCH-TASK'),
      );
      expect(records).toHaveLength(6);
      for (const r of records) {
        const freeze = r.record.fixes.find((f) => f.fix === 'tools-freeze');
        expect(freeze?.changed).toBe(false);
        expect(freeze?.notes.join(' ')).toContain('declares its own deferred tools');
        expect(String(r.body)).not.toContain('cacheward_deferred_placeholder');
        expect(toolNames(body(r)).filter((n) => n === 'DeferredToolPlaceholder')).toHaveLength(1);
        expect(r.record.status).toBe(200);
      }
      expect(run.simStats.errors).toBe(0);
    },
    TEST_MS,
  );
});
