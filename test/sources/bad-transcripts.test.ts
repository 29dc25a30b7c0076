// Transcripts that are damaged, newer than this reader, or incomplete: each bad line is skipped with one
// warning naming file and line, and nothing else is lost. The transcripts are written by real runs (the newest
// Claude Code and Codex, offline), then damaged here.

import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PriceTable } from '../../src/analyze/price-table.js';
import { readCaptures } from '../../src/capture/capture-reader.js';
import { analyzePaths } from '../../src/report/analyze-paths.js';
import { cli } from '../cli/run-cli.js';
import { type AgentStack, startAgentStack } from '../clients/agent-harness.js';
import { script as claudeScript, dir } from '../clients/claude-scenarios.js';
import { script as codexScript } from '../clients/codex-scenarios.js';

/** Every `.jsonl` below a folder. */
function jsonl(folder: string): string[] {
  return readdirSync(folder, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.jsonl'))
    .map((f) => join(folder, f));
}

async function read(file: string) {
  const warnings: string[] = [];
  const records = [];
  for await (const r of readCaptures([file], { onWarning: (w) => warnings.push(w) })) records.push(r);
  return { records, warnings };
}

const lines = (file: string) => readFileSync(file, 'utf8').split('\n');

describe('damaged and unknown transcript lines', () => {
  let stack: AgentStack;
  let claudeFile = '';
  let codexFile = '';
  let scratch = '';
  let copies = 0;
  /** A copy of `file` with its lines changed by `edit`, in a folder of its own. */
  const damaged = (file: string, edit: (l: string[]) => string[]) => {
    const folder = join(scratch, `copy-${copies++}`);
    mkdirSync(folder);
    const out = join(folder, 'session.jsonl');
    writeFileSync(out, edit(lines(file)).join('\n'));
    return out;
  };

  beforeAll(async () => {
    stack = await startAgentStack({
      script: ({ workDir }: { workDir: string }) => ({
        conversations: [...claudeScript({ workDir }).conversations, ...codexScript.conversations],
      }),
    });
    const cwd = dir(stack, 'resume');
    const claude = await stack.run('claude', { prompt: 'RESUME-TASK first question', cwd });
    expect(claude.exitCode, claude.stderr).toBe(0);
    const again = await stack.run('claude', { prompt: 'second question', cwd, args: ['--continue'] });
    expect(again.exitCode, again.stderr).toBe(0);
    const edit = dir(stack, 'edit');
    writeFileSync(join(edit, 'a.txt'), 'hello\n');
    const codex = await stack.run('codex', {
      prompt: 'EDIT-TASK patch a.txt',
      cwd: edit,
      args: ['-s', 'workspace-write'],
    });
    expect(codex.exitCode, codex.stderr).toBe(0);
    [claudeFile] = jsonl(join(claude.home, '.claude/projects')) as [string];
    [codexFile] = jsonl(join(codex.home, 'codex/sessions')) as [string];
    scratch = mkdtempSync(join(tmpdir(), 'cacheward-bad-transcripts-'));
  }, 120_000);
  afterAll(() => stack?.close());

  it('reads the undamaged transcripts without a warning', async () => {
    const claude = await read(claudeFile);
    expect(claude.warnings).toEqual([]);
    expect(claude.records).toHaveLength(2);
    const codex = await read(codexFile);
    expect(codex.warnings).toEqual([]);
    expect(codex.records).toHaveLength(2);
  });

  it('skips a half-written last line with one warning naming it', async () => {
    const file = damaged(claudeFile, (l) => {
      const last = l.findLastIndex((x) => x.trim() !== '');
      return [...l.slice(0, last), (l[last] as string).slice(0, 40)];
    });
    const { records, warnings } = await read(file);
    expect(records).toHaveLength(2);
    const n = lines(file).length;
    expect(warnings).toEqual([`${file}:${n}: skipped a truncated or invalid line (40 characters, not JSON)`]);
  });

  it('skips records of an unknown type and of a version never seen: one warning each, then a count', async () => {
    const file = damaged(claudeFile, (l) => {
      const out = [...l];
      const user = out.findIndex((x) => x.includes('"type":"user"'));
      const v = JSON.parse(out[user] as string);
      out.splice(user + 1, 0, JSON.stringify({ ...v, type: 'brand-new-record' }));
      out.splice(user + 2, 0, JSON.stringify({ ...v, type: 'brand-new-record' }));
      const att = out.findIndex((x) => x.includes('"type":"attachment"'));
      out[att] = JSON.stringify({ ...JSON.parse(out[att] as string), version: '9.0.0' });
      return out;
    });
    const { records, warnings } = await read(file);
    expect(records).toHaveLength(2);
    const at = (needle: string) => lines(file).findIndex((x) => x.includes(needle)) + 1;
    expect(warnings).toContain(
      `${file}:${at('brand-new-record')}: skipped a record of a type this version does not know ("brand-new-record")`,
    );
    expect(warnings).toContain(
      `${file}:${at('"9.0.0"')}: skipped a record of Claude Code 9.0.0, a version never seen (known: 1.x, 2.x)`,
    );
    expect(warnings).toContain(
      `${file}:${at('brand-new-record')}: and 1 more line like it (type:brand-new-record)`,
    );
    expect(warnings).toHaveLength(3);
  });

  it('uses a request whose rebuilt body does not match its digest, and says so', async () => {
    const file = damaged(claudeFile, (l) =>
      l.map((x) => (x.includes('"type":"api-request-blob"') ? x.replace('RESUME-TASK', 'RESUME-TASX') : x)),
    );
    const { records, warnings } = await read(file);
    expect(records).toHaveLength(2);
    const request = lines(file).findIndex((x) => x.includes('"type":"api-request"')) + 1;
    expect(warnings[0]).toMatch(
      new RegExp(
        `^${file}:${request}: request [0-9a-f-]+: the body rebuilt from the transcript does not match its requestDigest; it is used as rebuilt$`,
      ),
    );
    expect(records[0]?.body).toBeUndefined();
  });

  it('reads a call whose request record lost a message from its messages and usage instead', async () => {
    const file = damaged(claudeFile, (l) => {
      const blob = l.findIndex((x) => x.includes('"type":"api-request-blob"'));
      return [...l.slice(0, blob), ...l.slice(blob + 1)];
    });
    const { records, warnings } = await read(file);
    expect(records).toHaveLength(2);
    expect(
      warnings.some((w) =>
        w.includes('is not in the transcript; the call is read from its messages and usage instead'),
      ),
    ).toBe(true);
    expect(records[0]?.record.prefix?.unrecorded).toEqual(['tools', 'system', 'params', 'injected']);
    expect(records[0]?.record.usage?.normalized?.inputTotal).toBeGreaterThan(0);
  });

  it('skips damaged and unknown Codex lines the same way', async () => {
    const file = damaged(codexFile, (l) => {
      const out = [...l];
      const ctx = out.findIndex((x) => x.includes('"type":"turn_context"'));
      out.splice(ctx + 1, 0, '{"timestamp":"2026-12-06T00:00:00.000Z","type":"brand_new_item","payload":{}}');
      out.splice(ctx + 2, 0, '{"timestamp":"2026-12-06T00:00:00.000Z","type":"event_msg","pay');
      return out;
    });
    const { records, warnings } = await read(file);
    expect(records).toHaveLength(2);
    const at = (needle: string) => lines(file).findIndex((x) => x.includes(needle)) + 1;
    expect(warnings).toEqual([
      `${file}:${at('brand_new_item')}: skipped a record of a type this version does not know ("brand_new_item")`,
      `${file}:${at('brand_new_item') + 1}: skipped a truncated or invalid line (63 characters, not JSON)`,
    ]);
  });

  it('a folder with no transcripts is one line and exit 2; one session file is a report of its own', async () => {
    const folder = join(scratch, 'not-transcripts');
    mkdirSync(join(folder, 'projects'), { recursive: true });
    writeFileSync(join(folder, 'history.jsonl'), '{"display":"hello","timestamp":1796525539000}\n');
    const none = await cli(['report', folder]);
    expect(none.code).toBe(2);
    expect(none.stderr.split('\n')).toHaveLength(1);
    expect(none.stderr).toContain('no agent transcripts below it');
    const one = join(scratch, 'one');
    mkdirSync(one);
    copyFileSync(claudeFile, join(one, 'x.jsonl'));
    const report = await cli(['report', '--json', join(one, 'x.jsonl')]);
    expect(report.code, report.stderr).toBe(0);
    expect(JSON.parse(report.stdout).totals.requests).toBe(2);
    const analysis = await analyzePaths([claudeFile, codexFile], { prices: new PriceTable() });
    expect(analysis.totals.requests).toBe(4);
    expect(analysis.totals.sessions).toBe(2);
  });
});
