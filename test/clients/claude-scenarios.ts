// The scripted Claude Code scenarios the client tests share: a tool loop, a resumed session, a subagent,
// an MCP server whose tool list grows, a model switch on resume, a compaction and two sessions of one project
// at once, each told apart by a word in its first prompt.

import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { AgentStack } from './agent-harness.js';

const FIXTURE = fileURLToPath(new URL('./fixtures/mcp-server.mjs', import.meta.url));

/** The scripted conversations, one per test, told apart by a word in their first user message. */
export const script = ({ workDir }: { workDir: string }) => ({
  conversations: [
    {
      match: 'LOOP-TASK',
      turns: [
        {
          text: 'Reading.',
          tool_calls: [{ name: 'Read', input: { file_path: join(workDir, 'loop/notes.txt') } }],
        },
        {
          text: 'Counting.',
          tool_calls: [{ name: 'Bash', input: { command: 'wc -c notes.txt', description: 'count' } }],
        },
        {
          text: 'Writing.',
          tool_calls: [
            { name: 'Write', input: { file_path: join(workDir, 'loop/out.txt'), content: 'looped\n' } },
          ],
        },
        { text: 'Loop done.' },
      ],
    },
    {
      match: 'RESUME-TASK',
      turns: [
        { text: 'First answer.' },
        { text: 'Resumed answer.' },
        { text: 'Resumed again.' },
        { text: 'Forked answer.' },
      ],
    },
    // `--continue --model …`: the same conversation on another model.
    { match: 'SWITCH-TASK', turns: [{ text: 'On the default model.' }, { text: 'On the other model.' }] },
    // `/compact` on resume: the compaction call answers the summary, and the next session starts from it.
    {
      match: 'COMPACT-TASK',
      turns: [{ text: 'First answer.' }, { text: '<summary>COMPACTED-SUMMARY</summary>' }],
    },
    { match: 'COMPACTED-SUMMARY', turns: [{ text: 'After compaction.' }] },
    // Two sessions of one project at once.
    ...['A', 'B'].map((x) => ({
      match: `INTERLEAVE-${x}`,
      turns: [
        {
          text: `Session ${x}.`,
          tool_calls: [{ name: 'Bash', input: { command: `echo ${x}`, description: 'echo' } }],
          delay_ms: 300,
        },
        { text: `Session ${x} done.` },
      ],
    })),
    { match: 'SUBAGENT-TASK', turns: [{ text: 'Subagent found 42.' }] },
    {
      match: 'DELEGATE-TASK',
      turns: [
        {
          text: 'Delegating.',
          tool_calls: [
            {
              name: 'Agent',
              input: {
                description: 'Count the notes',
                prompt: 'SUBAGENT-TASK count the notes',
                subagent_type: 'general-purpose',
              },
            },
          ],
        },
        { text: 'Delegated: done.' },
        // The newest Claude Code runs the subagent in the background and is told when it is done.
        { text: 'Subagent reported.' },
      ],
    },
    {
      match: 'GROW-TASK',
      turns: [
        { text: 'Growing.', tool_calls: [{ name: 'mcp__fixture__grow', input: {} }] },
        // Claude Code lists the tools again after list_changed, beside this request: give it time.
        {
          text: 'Looking up.',
          tool_calls: [{ name: 'mcp__fixture__lookup', input: { word: 'cache' } }],
          delay_ms: 1500,
        },
        { text: 'Using it.', tool_calls: [{ name: 'mcp__fixture__extra_1', input: {} }] },
        { text: 'Grown.' },
      ],
    },
    {
      // The newest Claude Code defers MCP tools behind ToolSearch: its tools[] never changes.
      match: 'TOOLSEARCH-TASK',
      turns: [
        {
          text: 'Searching.',
          tool_calls: [
            { name: 'ToolSearch', input: { query: 'select:mcp__fixture__grow,mcp__fixture__lookup' } },
          ],
        },
        { text: 'Growing.', tool_calls: [{ name: 'mcp__fixture__grow', input: {} }] },
        {
          text: 'Looking up.',
          tool_calls: [{ name: 'mcp__fixture__lookup', input: { word: 'cache' } }],
          delay_ms: 1500,
        },
        {
          text: 'Searching again.',
          tool_calls: [{ name: 'ToolSearch', input: { query: 'select:mcp__fixture__extra_1' } }],
        },
        { text: 'Using it.', tool_calls: [{ name: 'mcp__fixture__extra_1', input: {} }] },
        { text: 'Grown.' },
      ],
    },
  ],
});

export function dir(stack: AgentStack, name: string): string {
  const d = join(stack.workDir, name);
  mkdirSync(d, { recursive: true });
  return d;
}

export function mcpFixture(log: string) {
  return { fixture: { command: process.execPath, args: [FIXTURE], env: { MCP_FIXTURE_LOG: log } } };
}
