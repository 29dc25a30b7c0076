// A fix never costs more than no fix, on real agents: the same Claude Code and Codex sessions run twice
// against fresh simulators, without fixes and with them; the cache writes are compared and the replay gate
// runs on the captures the proxy made with the fixes on.

import { appendFileSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { fixRegistry } from '../../src/fixes/registry.js';
import { replayCaptures } from '../../src/replay/replay-captures.js';
import { cli } from '../cli/run-cli.js';
import { type AgentName, type AgentStack, type RunOptions, startAgentStack } from './agent-harness.js';
import { script as claudeScript, dir, mcpFixture } from './claude-scenarios.js';
import { script as codexScript } from './codex-scenarios.js';

const TEST_MS = 240_000;

type Scenario = {
  name: string;
  agent: AgentName;
  script: unknown;
  fixes: string[];
  steps: (s: AgentStack) => RunOptions[];
};
const FIXTURE = fileURLToPath(new URL('./fixtures/mcp-server.mjs', import.meta.url));

const CLAUDE_FIXES = ['tools-freeze', 'pin-reminders'];

const SCENARIOS: Scenario[] = [
  {
    name: 'Claude Code: a tool loop',
    agent: 'claude',
    script: claudeScript,
    fixes: CLAUDE_FIXES,
    steps: (s) => {
      const cwd = dir(s, 'loop');
      writeFileSync(join(cwd, 'notes.txt'), 'the secret is 42\n');
      return [
        {
          prompt: 'LOOP-TASK read, count and write',
          cwd,
          args: ['--allowedTools', 'Read', 'Bash(wc:*)', 'Write'],
        },
      ];
    },
  },
  {
    name: 'Claude Code: a session resumed with --continue',
    agent: 'claude',
    script: claudeScript,
    fixes: CLAUDE_FIXES,
    steps: (s) => {
      const cwd = dir(s, 'resume');
      return [
        { prompt: 'RESUME-TASK first question', cwd },
        { prompt: 'second question', cwd, args: ['--continue'] },
      ];
    },
  },
  {
    name: 'Claude Code: a general-purpose subagent under the same session id',
    agent: 'claude',
    script: claudeScript,
    fixes: CLAUDE_FIXES,
    steps: (s) => [
      { prompt: 'DELEGATE-TASK ask a subagent', cwd: dir(s, 'delegate'), args: ['--allowedTools', 'Agent'] },
    ],
  },
  {
    name: 'Claude Code: an MCP server that adds a tool',
    agent: 'claude',
    script: claudeScript,
    fixes: CLAUDE_FIXES,
    steps: (s) => {
      const log = join(s.root, 'mcp.log');
      appendFileSync(log, '');
      return [
        {
          prompt: 'GROW-TASK grow the server',
          cwd: dir(s, 'grow'),
          mcpServers: mcpFixture(log),
          args: ['--allowedTools', 'mcp__fixture__grow', 'mcp__fixture__lookup', 'mcp__fixture__extra_1'],
        },
      ];
    },
  },
  {
    name: 'Codex: an apply_patch edit, then an MCP tool call',
    agent: 'codex',
    script: codexScript,
    fixes: ['tools-freeze', 'tools-sort'],
    steps: (s) => {
      const cwd = dir(s, 'edit');
      writeFileSync(join(cwd, 'a.txt'), 'hello\n');
      const log = join(s.root, 'codex-mcp.log');
      appendFileSync(log, '');
      return [
        { prompt: 'EDIT-TASK patch a.txt', cwd, args: ['-s', 'workspace-write'] },
        {
          prompt: 'MCP-TASK look up cache',
          cwd: dir(s, 'mcp'),
          mcpServers: {
            fixture: { command: process.execPath, args: [FIXTURE], env: { MCP_FIXTURE_LOG: log } },
          },
        },
      ];
    },
  },
];

/** Runs a scenario on a fresh stack; returns the tokens it wrote and read, and the stack (kept open). */
async function run(sc: Scenario, fix: string[]) {
  const stack = await startAgentStack({ script: sc.script, fix, keep: true });
  let written = 0;
  let read = 0;
  for (const step of sc.steps(stack)) {
    const r = await stack.run(sc.agent, step);
    expect(r.exitCode, r.stderr).toBe(0);
    const t = sc.agent === 'claude' ? r.tokens.anthropic : r.tokens.openai;
    written += t.written;
    read += t.read;
  }
  return { stack, written, read };
}

describe('with fixes on, a real agent never writes more than without them', () => {
  it.each(SCENARIOS)(
    '$name',
    async (sc) => {
      const off = await run(sc, []);
      const on = await run(sc, sc.fixes);
      await on.stack.close();
      await off.stack.close();
      try {
        if (process.env.CACHEWARD_PRINT)
          console.log(
            `${sc.name}: written ${off.written} without, ${on.written} with; read ${off.read} / ${on.read}`,
          );
        // Live: two runs of a real agent differ by a few tokens of their own (a duration in a tool result),
        // so the live comparison allows that noise; the replay below compares the very same bytes exactly.
        const noise = Math.max(16, off.written * 0.002);
        expect(on.written, `written with ${sc.fixes.join(',')} vs without`).toBeLessThanOrEqual(
          off.written + noise,
        );
        const replay = await replayCaptures([off.stack.captureDir], {
          fixes: fixRegistry().resolve(sc.fixes),
        });
        for (const x of replay.sessions) {
          expect(x.withFixes.written, x.session).toBeLessThanOrEqual(x.withoutFixes.written);
          expect(x.withFixes.rewritten, x.session).toBeLessThanOrEqual(x.withoutFixes.rewritten);
        }
        // The gate holds on what the proxy forwarded with the fixes on, and on the plain captures too.
        for (const captures of [on.stack.captureDir, off.stack.captureDir]) {
          const gate = await cli(['replay', captures, '--fix', sc.fixes.join(','), '--gate']);
          expect(gate.stdout + gate.stderr, captures).toContain('all hold');
          expect(gate.code).toBe(0);
        }
      } finally {
        for (const s of [on.stack, off.stack])
          await rm(s.root, { recursive: true, force: true, maxRetries: 3 });
      }
    },
    TEST_MS,
  );
});
