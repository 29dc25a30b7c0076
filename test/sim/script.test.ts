import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { describe, expect, it } from 'vitest';
import { parseReplyScript, ReplyScriptError } from '../../src/sim/reply-script.js';
import { cli } from '../cli/run-cli.js';
import { startSim } from './helpers.js';

type Json = Record<string, unknown>;

const script = parseReplyScript(
  {
    conversations: [
      {
        match: 'fix the bug',
        turns: [
          {
            thinking: 'I should read the file first.',
            text: 'Reading it.',
            tool_calls: [{ name: 'Read', input: { path: 'a.ts' } }],
          },
          { tool_calls: [{ name: 'Edit', input: { path: 'a.ts', old: 'x', new: 'y' } }], delay_ms: 20 },
          { text: 'Fixed.', stop_reason: 'end_turn' },
        ],
      },
      { match: 'overloaded', turns: [{ error: { status: 529, message: 'busy' } }] },
    ],
  },
  'inline',
);
const h = await startSim({ script });

describe('scripted replies', () => {
  it.each([false, true])(
    'drives an Anthropic SDK agent through a multi-turn tool loop (stream: %s)',
    async (stream) => {
      const client = h.anthropic();
      const tools = ['Read', 'Edit'].map((name) => ({
        name,
        description: name,
        input_schema: { type: 'object' },
      }));
      const messages: Json[] = [{ role: 'user', content: 'please fix the bug in a.ts' }];
      const seen: string[] = [];
      for (let turn = 0; turn < 5; turn++) {
        const params = { model: 'claude-opus-5', max_tokens: 100, tools, messages } as never;
        const reply = stream
          ? await client.messages.stream(params).finalMessage()
          : await client.messages.create(params);
        seen.push(reply.stop_reason as string);
        messages.push({ role: 'assistant', content: reply.content });
        const uses = reply.content.filter((b) => b.type === 'tool_use');
        if (!uses.length) break;
        if (turn === 0) {
          expect(reply.content[0]).toMatchObject({
            type: 'thinking',
            thinking: 'I should read the file first.',
          });
          expect(uses[0]).toMatchObject({ name: 'Read', input: { path: 'a.ts' } });
        }
        messages.push({
          role: 'user',
          content: uses.map((u) => ({ type: 'tool_result', tool_use_id: u.id, content: 'ok' })),
        });
      }
      expect(seen).toEqual(['tool_use', 'tool_use', 'end_turn']);
      expect((messages.at(-1) as { content: Array<{ text?: string }> }).content[0]?.text).toBe('Fixed.');
    },
  );

  it('plays a scripted error, and a default reply for an unscripted conversation', async () => {
    const err = await h
      .anthropic()
      .messages.create({
        model: 'claude-opus-5',
        max_tokens: 10,
        messages: [{ role: 'user', content: 'overloaded?' }],
      })
      .catch((e) => e);
    expect(err).toBeInstanceOf(Anthropic.APIError);
    expect(err.status).toBe(529);
    const plain = await h.anthropic().messages.create({
      model: 'claude-opus-5',
      max_tokens: 10,
      messages: [{ role: 'user', content: 'hello' }],
    });
    expect(plain.content).toEqual([{ type: 'text', text: 'Simulated reply 1.' }]);
  });

  it('rejects a malformed script with the file and JSON path', () => {
    expect(() => parseReplyScript({ conversations: [{ turns: [{ txt: 'x' }] }] }, 'my-script.json')).toThrow(
      ReplyScriptError,
    );
    expect(() => parseReplyScript({ conversations: [{ turns: [{ txt: 'x' }] }] }, 'my-script.json')).toThrow(
      /my-script.json: \$.conversations\[0\].turns\[0\].txt: unknown field/,
    );
  });

  it('`cacheward sim --script` exits 2 naming a bad file', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cacheward-script-'));
    const bad = join(dir, 'bad.json');
    writeFileSync(bad, '{"conversations": [{"turns": "nope"}]}');
    const r = await cli(['sim', '--script', bad]);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(`cacheward: ${bad}: $.conversations[0].turns: expected an array of turns`);
    const missing = await cli(['sim', '--script', join(dir, 'none.json')]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/none\.json: cannot read/);
    const faults = await cli(['sim', '--faults', 'boom@0.1']);
    expect(faults.code).toBe(2);
    expect(faults.stderr).toMatch(/--faults: unknown fault "boom"/);
  });
});
