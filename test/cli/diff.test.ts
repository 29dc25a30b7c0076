import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { agentConversation, anthropicTool, appendUserTurn } from '../../src/sim/agent-conversation.js';
import { cli } from './run-cli.js';

const dir = mkdtempSync(join(tmpdir(), 'cacheward-diff-'));
const file = (name: string, content: unknown) => {
  const p = join(dir, name);
  writeFileSync(p, typeof content === 'string' ? content : JSON.stringify(content, null, 2));
  return p;
};

const base = agentConversation({ turns: 4 });
const withTool = structuredClone(appendUserTurn(base, 'more'));
(withTool.tools as unknown[]).splice(4, 0, anthropicTool('Write2'));

describe('cacheward diff', () => {
  it('says identical prefixes agree and exits 0', async () => {
    const r = await cli(['diff', file('a.json', base), file('a2.json', appendUserTurn(base, 'next'))]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^prefixes agree/);
  });

  it('prints the divergence as one sentence with details, and exits 1', async () => {
    const r = await cli(['diff', file('a.json', base), file('b.json', withTool)]);
    expect(r.code).toBe(1);
    const [first, ...rest] = r.stdout.split('\n');
    expect(first).toMatch(
      /^tools diverge at index 4: `Write2` was inserted before `Edit`; [\d,]+ tokens after it must be re-written$/,
    );
    expect(rest.join('\n')).toMatch(/byte offset: +A \d+, B \d+/);
  });

  it('prints the structured result with --json', async () => {
    const r = await cli(['diff', '--json', file('a.json', base), file('b.json', withTool)]);
    const j = JSON.parse(r.stdout);
    expect(j.identical).toBe(false);
    expect(j.divergence.level).toBe('tools');
    expect(j.divergence.change.added[0]).toEqual({ name: 'Write2', index: 4, before: 'Edit' });
    expect(typeof j.sentence).toBe('string');
    expect(j.a.blocks).toBeGreaterThan(0);
  });

  it('reads an exchange wrapper and folds its anthropic-beta header', async () => {
    const a = file('ex-a.json', { route: '/v1/messages', headers: { 'anthropic-beta': 'x-1' }, body: base });
    const b = file('ex-b.json', {
      route: '/v1/messages',
      headers: { 'anthropic-beta': 'x-1,x-2' },
      body: base,
    });
    const r = await cli(['diff', a, b]);
    expect(r.code).toBe(1);
    expect(r.stdout).toContain('`anthropic-beta` changed from ["x-1"] to ["x-1","x-2"]');
  });

  it('reads stdin for -', async () => {
    const r = await cli(['diff', '-', file('a.json', base)], JSON.stringify(base));
    expect(r.code).toBe(0);
  });

  it('names the file, line and column of malformed JSON and exits 2', async () => {
    const bad = file('bad.json', '{\n  "model": "m",\n  "messages": [,]\n}');
    const r = await cli(['diff', file('a.json', base), bad]);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(`cacheward: ${bad}:3:16: invalid JSON (byte 33): expected a value, found ','`);
    expect(r.stderr.split('\n')).toHaveLength(1);
  });

  it('reports positions inside an exchange wrapper against the whole file', async () => {
    const bad = file('bad-ex.json', '{"route":"/v1/messages",\n"body": {"model": "m",\n "messages": 7}}');
    const r = await cli(['diff', bad, bad]);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(`cacheward: ${bad}:3:14: not a request body: $.messages: must be an array`);
  });

  it('names the file, line and column of nesting too deep or invalid UTF-8, and exits 2', async () => {
    const deep = file(
      'deep.json',
      `{"model":"m","messages":[],\n"metadata":${'['.repeat(600)}${']'.repeat(600)}}`,
    );
    const r = await cli(['diff', deep, deep]);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(
      `cacheward: ${deep}:2:523: nested deeper than 512 levels (byte 550); not a request body cacheward reads`,
    );
    const bytes = Buffer.from('{"model":"m","messages":[{"role":"user","content":"a?"}]}');
    bytes[bytes.indexOf('?')] = 0xff;
    const utf8 = join(dir, 'utf8.json');
    writeFileSync(utf8, bytes);
    const u = await cli(['diff', utf8, utf8]);
    expect(u.code).toBe(2);
    expect(u.stderr).toMatch(/utf8\.json:1:\d+: invalid JSON \(byte 52\): the body is not valid UTF-8/);
  });

  it('exits 2 for a missing file and for bad usage', async () => {
    const r = await cli(['diff', join(dir, 'nope.json'), join(dir, 'nope.json')]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/nope\.json: cannot read: no such file$/);
    expect((await cli(['diff', 'only-one.json'])).code).toBe(2);
    expect((await cli(['no-such-command'])).code).toBe(2);
    const bogus = await cli(['diff', '--format', 'bogus', 'a', 'b']);
    expect(bogus.code).toBe(2);
    expect(bogus.stderr).toMatch(/Allowed choices are anthropic-messages, openai-chat, openai-responses/);
  });
});

describe('cacheward --help and --version', () => {
  it.each([[['--help']], [['diff', '--help']], [['demo', '--help']]])(
    '%j prints help and exits 0',
    async (args) => {
      const r = await cli(args);
      expect(r.code).toBe(0);
      expect(r.stdout).toMatch(/Usage: cacheward/);
    },
  );

  it('prints the package version', async () => {
    const r = await cli(['--version']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^\d+\.\d+\.\d+$/);
  });
});
