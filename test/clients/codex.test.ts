// The real Codex CLI (`codex exec`), offline: a config.toml provider pointing at `cacheward proxy`, in front of
// `cacheward sim --script`. A file edit through apply_patch (freeform) and an MCP tool call (tool search, then
// a call inside the server's namespace).

import { appendFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ReadRecord } from '../../src/capture/capture-reader.js';
import { type AgentStack, startAgentStack } from './agent-harness.js';
import { PATCH, script } from './codex-scenarios.js';

type Json = Record<string, any>;

const FIXTURE = fileURLToPath(new URL('./fixtures/mcp-server.mjs', import.meta.url));
const TEST_MS = 150_000;
const body = (r: ReadRecord): Json => JSON.parse(String(r.body));
const userTexts = (b: Json): string[] =>
  (b.input as Json[])
    .filter((i) => i.role === 'user')
    .flatMap((i) => (i.content as Json[]).map((c) => String(c.text)));
const items = (b: Json, type: string): Json[] => (b.input as Json[]).filter((i) => i.type === type);

async function conversation(stack: AgentStack, word: string): Promise<Json[]> {
  return (await stack.records()).map(body).filter((b) => userTexts(b).some((t) => t.includes(word)));
}

function dir(stack: AgentStack, name: string): string {
  const d = join(stack.workDir, name);
  mkdirSync(d, { recursive: true });
  return d;
}

async function editSession(stack: AgentStack) {
  const cwd = dir(stack, 'edit');
  writeFileSync(join(cwd, 'a.txt'), 'hello\n');
  const run = await stack.run('codex', {
    prompt: 'EDIT-TASK patch a.txt',
    cwd,
    args: ['-s', 'workspace-write'],
  });
  return { run, cwd };
}

describe('Codex through the proxy into the simulator', () => {
  let stack: AgentStack;
  beforeAll(async () => {
    stack = await startAgentStack({ script });
  }, 30_000);
  afterAll(() => stack?.close());

  it(
    'edits a file through apply_patch, a freeform custom tool call',
    async () => {
      const { run, cwd } = await editSession(stack);
      expect(run.exitCode).toBe(0);
      expect(run.stdout.trim()).toBe('Patched a.txt.');
      expect(readFileSync(join(cwd, 'a.txt'), 'utf8')).toBe('hello, patched\n');
      const reqs = await conversation(stack, 'EDIT-TASK');
      expect(reqs).toHaveLength(2);
      const [first, second] = reqs as [Json, Json];
      expect(first.tools.find((t: Json) => t.name === 'apply_patch')).toMatchObject({
        type: 'custom',
        format: { type: 'grammar', syntax: 'lark' },
      });
      expect(items(second, 'custom_tool_call')).toEqual([
        expect.objectContaining({ name: 'apply_patch', input: PATCH }),
      ]);
      expect(items(second, 'custom_tool_call_output')[0]?.output).toMatch(
        /Success\. Updated the following files:\nM a\.txt/,
      );
      // One conversation, one cache key: the session id.
      expect(second.prompt_cache_key).toBe(first.prompt_cache_key);
      expect(run.tokens.openai.read).toBeGreaterThan(0);
    },
    TEST_MS,
  );

  it(
    'calls an MCP tool: a client tool search loads the namespace, then a namespaced function call',
    async () => {
      const log = join(stack.root, 'codex-mcp.log');
      appendFileSync(log, '');
      const run = await stack.run('codex', {
        prompt: 'MCP-TASK look up cache',
        cwd: dir(stack, 'mcp'),
        mcpServers: {
          fixture: { command: process.execPath, args: [FIXTURE], env: { MCP_FIXTURE_LOG: log } },
        },
      });
      expect(run.exitCode).toBe(0);
      expect(run.stdout.trim()).toBe('Looked it up.');
      const calls = readFileSync(log, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l))
        .filter((m) => m.method === 'tools/call');
      expect(calls.map((c) => [c.params.name, c.params.arguments])).toEqual([['lookup', { word: 'cache' }]]);
      const reqs = await conversation(stack, 'MCP-TASK');
      expect(reqs).toHaveLength(3);
      const [, second, third] = reqs as [Json, Json, Json];
      const loaded = items(second, 'tool_search_output')[0]?.tools as Json[];
      expect(loaded).toEqual([
        expect.objectContaining({
          type: 'namespace',
          name: 'mcp__fixture',
          tools: [expect.objectContaining({ type: 'function', name: 'lookup', defer_loading: true })],
        }),
      ]);
      expect(items(third, 'function_call')[0]).toMatchObject({ name: 'lookup', namespace: 'mcp__fixture' });
      expect(JSON.stringify(items(third, 'function_call_output')[0]?.output)).toContain(
        'fixture definition of cache',
      );
    },
    TEST_MS,
  );
});

describe('Codex with fixes on', () => {
  let stack: AgentStack;
  beforeAll(async () => {
    stack = await startAgentStack({ script, fix: ['tools-freeze', 'tools-sort'] });
  }, 30_000);
  afterAll(() => stack?.close());

  it(
    'edits the file through `--fix tools-freeze,tools-sort`',
    async () => {
      const { run, cwd } = await editSession(stack);
      expect(run.exitCode).toBe(0);
      expect(run.stdout.trim()).toBe('Patched a.txt.');
      expect(readFileSync(join(cwd, 'a.txt'), 'utf8')).toBe('hello, patched\n');
      const records = await stack.records();
      expect(records).toHaveLength(2);
      expect(
        records.every((r) => r.record.fixes.map((f) => f.fix).join() === 'tools-sort,tools-freeze'),
      ).toBe(true);
      expect(run.simStats.openai.requests).toBe(2);
    },
    TEST_MS,
  );
});
