// `cacheward watch` on the ways a transcript file changes under it: a half-written last line, a subagent's
// file in a new folder, a session rewritten on resume (in place, or replaced), a truncated file, a file deleted
// and written again. The lines are the newest Claude Code's own, from a real run at the start of this file,
// copied into a temp folder piece by piece; every case ends where `cacheward report` on the same files is.

import {
  appendFileSync,
  closeSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  truncateSync,
  unlinkSync,
  utimesSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { AnalysisResult, AnalyzedRequest } from '../../src/analyze/analyze-captures.js';
import { type CachewardWatch, startWatch } from '../../src/watch/create-watch.js';
import { startAgentStack } from '../clients/agent-harness.js';
import { dir, script } from '../clients/claude-scenarios.js';
import { reportJson } from '../clients/transcript-parity.js';
import { expectSameAsReport, healthOf, stateOf, stateWith, waitFor } from './watch-harness.js';

/** A real session file's lines (each without its newline), and where it lives below the projects folder. */
interface Session {
  name: string;
  lines: string[];
}

const sessions: Record<'loop' | 'resume' | 'delegate', Session> = {
  loop: { name: '', lines: [] },
  resume: { name: '', lines: [] },
  delegate: { name: '', lines: [] },
};
let subagent: Session = { name: '', lines: [] };
/** How many lines of the resumed session its first run wrote (`--continue` appended the rest). */
let firstRunLines = 0;

const linesOf = (file: string) => readFileSync(file, 'utf8').split('\n').slice(0, -1);
const text = (lines: string[]) => lines.map((l) => `${l}\n`).join('');
const typeOf = (line: string) => (JSON.parse(line) as { type: string }).type;

/** A report's calls of one of the sessions above, in start order. */
function sessionCalls(report: Map<string, AnalyzedRequest>, key: keyof typeof sessions): string[] {
  const session = sessions[key].name.replace(/\.jsonl$/, '');
  return [...report.values()]
    .filter((r) => r.session === session)
    .sort((a, b) => a.time - b.time)
    .map((r) => r.id);
}

function loopCalls(report: AnalysisResult): AnalyzedRequest[] {
  const session = sessions.loop.name.replace(/\.jsonl$/, '');
  return report.requests.filter((r) => r.session === session).sort((a, b) => a.time - b.time);
}

/** The index of the first line after `from` whose record is of `type`. */
function indexOf(lines: string[], type: string, from = 0): number {
  const i = lines.findIndex((l, n) => n >= from && typeOf(l) === type);
  if (i < 0) throw new Error(`no ${type} line after ${from}`);
  return i;
}

beforeAll(async () => {
  const stack = await startAgentStack({ script });
  try {
    const run = async (prompt: string, cwd: string, args: string[] = []) => {
      const r = await stack.run('claude', { prompt, cwd, args });
      expect(r.exitCode, `${prompt}: ${r.stderr}`).toBe(0);
      return r;
    };
    const loop = dir(stack, 'loop');
    writeFileSync(join(loop, 'notes.txt'), 'the secret is 42\n');
    const r = await run('LOOP-TASK read, count and write', loop, [
      '--allowedTools',
      'Read',
      'Bash(wc:*)',
      'Write',
    ]);
    const resume = dir(stack, 'resume');
    await run('RESUME-TASK first question', resume);
    const projects = join(r.home, '.claude/projects');
    const fileIn = (suffix: string) => {
      const [folder] = readdirSync(projects).filter((f) => f.endsWith(suffix));
      const [file] = readdirSync(join(projects, folder as string)).filter((f) => f.endsWith('.jsonl'));
      return join(projects, folder as string, file as string);
    };
    firstRunLines = linesOf(fileIn('-resume')).length;
    await run('second question', resume, ['--continue']);
    await run('DELEGATE-TASK ask a subagent', dir(stack, 'delegate'), ['--allowedTools', 'Agent']);
    for (const [key, suffix] of [
      ['loop', '-loop'],
      ['resume', '-resume'],
      ['delegate', '-delegate'],
    ] as const) {
      const file = fileIn(suffix);
      sessions[key] = { name: basename(file), lines: linesOf(file) };
    }
    const delegate = fileIn('-delegate').replace(/\.jsonl$/, '');
    const [agent] = readdirSync(join(delegate, 'subagents')).filter((f) => f.endsWith('.jsonl'));
    subagent = { name: agent as string, lines: linesOf(join(delegate, 'subagents', agent as string)) };
  } finally {
    await stack.close();
  }
}, 180_000);

describe('cacheward watch on transcript files that change under it', () => {
  let root = '';
  let watch: CachewardWatch | undefined;
  let said: string[] = [];
  let warned: string[] = [];

  /**
   * A fresh projects folder (one project in it) and a watch on it, short looks. `prepare` writes what is there
   * before the watch starts and says its --since.
   */
  async function watching(
    settleMs = 30_000,
    prepare?: (project: string) => Promise<number | undefined>,
    maxFiles?: number,
  ): Promise<{ project: string; url: string }> {
    root = mkdtempSync(join(tmpdir(), 'cacheward-watch-'));
    const project = join(root, 'projects', '-work-project');
    mkdirSync(project, { recursive: true });
    const sinceMs = prepare ? await prepare(project) : undefined;
    said = [];
    warned = [];
    watch = await startWatch({
      paths: [join(root, 'projects')],
      settleMs,
      ...(sinceMs !== undefined ? { sinceMs } : {}),
      pollMs: 50,
      rescanMs: 500,
      ...(maxFiles !== undefined ? { maxFiles } : {}),
      logger: { info: (l) => said.push(l), warn: (l) => warned.push(l) },
    });
    await watch.start();
    return { project, url: watch.url };
  }

  const report = () => reportJson([join(root, 'projects')]);

  afterEach(async () => {
    await watch?.close();
    watch = undefined;
    rmSync(root, { recursive: true, force: true });
  });

  it('at start, shows the calls since --since and reads the earlier ones of the same files for context only', async () => {
    const resumeFile = (project: string) => join(project, sessions.resume.name);
    let full: AnalysisResult | undefined;
    const { project, url } = await watching(30_000, async (p) => {
      writeFileSync(join(p, sessions.loop.name), text(sessions.loop.lines));
      writeFileSync(resumeFile(p), text(sessions.resume.lines.slice(0, firstRunLines)));
      // The resumed session's file was last written two hours ago: not read until it changes.
      const old = new Date(Date.now() - 2 * 3_600_000);
      utimesSync(resumeFile(p), old, old);
      // The cutoff between the loop's second and third calls.
      full = await report();
      const times = loopCalls(full).map((r) => r.time);
      return Date.now() - ((times[1] as number) + (times[2] as number)) / 2;
    });
    const loop = loopCalls(full as AnalysisResult);
    const state = await stateWith(url, 2);
    let health = await healthOf(url);
    expect(health.transcripts.files).toBe(1);
    expect(health.transcripts.calls).toMatchObject({ shown: 2, context: 2 });
    // Judged against the calls before them: the third and fourth turns of the loop, as in the report.
    expect(state.requests.map((r) => r.id)).toEqual([loop[2]?.id, loop[3]?.id]);
    // The old file, written again (`--continue`), is read from its start: both its calls came after the cutoff.
    appendFileSync(resumeFile(project), text(sessions.resume.lines.slice(firstRunLines)));
    const after = await stateWith(url, 4);
    const final = new Map((await report()).requests.map((r) => [r.id, r]));
    expect(after.requests.map((r) => r.id)).toEqual([
      loop[2]?.id,
      loop[3]?.id,
      ...sessionCalls(final, 'resume'),
    ]);
    for (const row of after.requests) {
      const r = final.get(row.id);
      expect([row.session, row.relation, row.turn, row.cause ?? 'none', row.readTokens]).toEqual([
        r?.session,
        r?.relation,
        r?.turn,
        r?.miss?.cause ?? 'none',
        r?.usage?.cacheRead,
      ]);
    }
    health = await healthOf(url);
    expect(health.transcripts.files).toBe(2);
    expect(warned).toEqual([]);
  });

  it('past the bound, lets go of files written just now, hands on the responses they left open, and relates what they write next', async () => {
    // Two sessions written just now, each up to a response's line (open until the file settles), one file
    // followed at most: one is let go as soon as it is read, and read again when it would settle.
    const upToResponse = (lines: string[]) =>
      lines.slice(0, lines.findLastIndex((l) => typeOf(l) === 'assistant') + 1);
    const loop = sessions.loop.lines;
    const loopFirst = upToResponse(
      loop.slice(0, indexOf(loop, 'api-request', indexOf(loop, 'api-request') + 1)),
    );
    const resumeFirst = upToResponse(sessions.resume.lines.slice(0, firstRunLines));
    const { project, url } = await watching(
      2_000,
      async (p) => {
        writeFileSync(join(p, sessions.loop.name), text(loopFirst));
        writeFileSync(join(p, sessions.resume.name), text(resumeFirst));
        return undefined;
      },
      1,
    );
    expect((await healthOf(url)).transcripts.files).toBe(1);
    await expectSameAsReport(url, await report());
    expect((await healthOf(url)).transcripts.read).toBeGreaterThanOrEqual(3);
    // Both go on (the one let go is read again from its start): their next calls are related as in the report.
    appendFileSync(join(project, sessions.loop.name), text(loop.slice(loopFirst.length)));
    appendFileSync(
      join(project, sessions.resume.name),
      text(sessions.resume.lines.slice(resumeFirst.length)),
    );
    const r = await report();
    expect(r.totals.requests).toBe(6);
    await expectSameAsReport(url, r);
    expect((await healthOf(url)).transcripts.files).toBe(1);
    expect(warned).toEqual([]);
  });

  it('waits for a half-written line without a warning, and reads it once the rest is written', async () => {
    const { project, url } = await watching();
    const file = join(project, sessions.loop.name);
    const lines = sessions.loop.lines;
    // Up to the second call's response: its first line is cut in half.
    const second = indexOf(lines, 'assistant', indexOf(lines, 'api-request', indexOf(lines, 'user', 3) + 1));
    writeFileSync(file, text(lines.slice(0, second)));
    await stateWith(url, 1);
    const cut = lines[second] as string;
    appendFileSync(file, cut.slice(0, cut.length >> 1));
    await waitFor('the half line held', async () =>
      (await healthOf(url)).transcripts.partialLines === 1 ? true : undefined,
    );
    appendFileSync(file, `${cut.slice(cut.length >> 1)}\n`);
    appendFileSync(file, text(lines.slice(second + 1)));
    await expectSameAsReport(url, await report());
    expect((await healthOf(url)).transcripts.partialLines).toBe(0);
    expect(warned).toEqual([]);
  });

  it('reads a half line that never ends as it is once the file stops growing (--settle), with one warning', async () => {
    const { project, url } = await watching(300);
    const file = join(project, sessions.loop.name);
    const lines = sessions.loop.lines;
    const cut = lines[lines.length - 1] as string;
    writeFileSync(file, text(lines.slice(0, -1)) + cut.slice(0, 40));
    await waitFor('the warning for the torn line', async () => (warned.length ? true : undefined));
    expect(warned).toEqual([
      `${file}:${lines.length}: skipped a truncated or invalid line (40 characters, not JSON)`,
    ]);
    await expectSameAsReport(url, await report());
  });

  it('follows a subagent whose file appears in a new folder while its session is written', async () => {
    const { project, url } = await watching();
    const main = join(project, sessions.delegate.name);
    const folder = join(project, sessions.delegate.name.replace(/\.jsonl$/, ''), 'subagents');
    // The two files' lines in the order the agent wrote them (by their times, each file in its own order);
    // the subagents folder is made when its first line is due.
    const files = [
      { path: main, lines: sessions.delegate.lines, at: 0 },
      { path: join(folder, subagent.name), lines: subagent.lines, at: 0 },
    ];
    const timeOf = (f: (typeof files)[number]) => {
      for (let i = f.at; i >= 0; i--) {
        const t = (JSON.parse(f.lines[i] as string) as { timestamp?: string }).timestamp;
        if (t) return Date.parse(t);
      }
      return 0;
    };
    const write = (blocked: (f: (typeof files)[number]) => boolean) => {
      for (;;) {
        const due = files
          .filter((f) => f.at < f.lines.length && !blocked(f))
          .sort((a, b) => timeOf(a) - timeOf(b))[0];
        if (!due) return;
        if (due.path !== main) mkdirSync(folder, { recursive: true });
        appendFileSync(due.path, `${due.lines[due.at++]}\n`);
      }
    };
    // The main line's next call and the subagent's first start a moment apart: the one that started first is
    // answered last (its response held back until the other file is written). The other's call waits for it
    // (the report orders calls by start), and is shown after it.
    const [m, a] = files as [(typeof files)[number], (typeof files)[number]];
    const startOf = (lines: string[], i: number) =>
      Date.parse((JSON.parse(lines[i] as string) as { timestamp: string }).timestamp);
    const mainCall = indexOf(m.lines, 'api-request', indexOf(m.lines, 'api-request') + 1);
    const subCall = indexOf(a.lines, 'api-request');
    const [early, from] =
      startOf(m.lines, mainCall) <= startOf(a.lines, subCall) ? [m, mainCall] : [a, subCall];
    write((f) => f === early && f.at > from && typeOf(f.lines[f.at] as string) === 'assistant');
    await waitFor('the later call read and held', async () =>
      (await healthOf(url)).transcripts.calls.held > 0 ? true : undefined,
    );
    expect((await stateOf(url)).totals.requests).toBe(1);
    write(() => false);
    const r = await report();
    expect(r.totals.requests).toBe(4);
    await expectSameAsReport(url, r);
    expect((await healthOf(url)).transcripts.files).toBe(2);
    expect(warned).toEqual([]);
  });

  it('reads a session rewritten in place on resume again from its start, counting no call twice', async () => {
    const { project, url } = await watching();
    const file = join(project, sessions.resume.name);
    const lines = sessions.resume.lines;
    writeFileSync(file, text(lines.slice(0, firstRunLines)));
    await stateWith(url, 1);
    // The file written again from its start through the same inode, not as it was (its first line left out)
    // and longer than before: only the resumed call is new.
    const handle = openSync(file, 'r+');
    writeSync(handle, text(lines.slice(1)), 0);
    closeSync(handle);
    const r = await report();
    expect(r.totals.requests).toBe(2);
    await expectSameAsReport(url, r);
    const health = await healthOf(url);
    expect(health.transcripts.restarts).toBe(1);
    expect(health.transcripts.calls.duplicates).toBe(1);
    expect(said).toContain(
      `${file} was rewritten: read again from its start (calls already counted are not counted again)`,
    );
    expect(warned).toEqual([]);
  });

  it('reads a session replaced by another file of the same name (a rename over it) again, counting no call twice', async () => {
    const { project, url } = await watching();
    const file = join(project, sessions.resume.name);
    const lines = sessions.resume.lines;
    writeFileSync(file, text(lines.slice(0, firstRunLines)));
    await stateWith(url, 1);
    writeFileSync(`${file}.tmp`, text(lines));
    renameSync(`${file}.tmp`, file);
    await expectSameAsReport(url, await report());
    const health = await healthOf(url);
    expect(health.transcripts.restarts).toBe(1);
    expect(said.some((l) => l.startsWith(`${file} was replaced:`))).toBe(true);
    expect(warned).toEqual([]);
  });

  it('reads a truncated file again from its start when it is written again, counting no call twice', async () => {
    const { project, url } = await watching();
    const file = join(project, sessions.loop.name);
    const lines = sessions.loop.lines;
    writeFileSync(file, text(lines));
    const r = await report();
    expect(r.totals.requests).toBe(4);
    await stateWith(url, 4);
    truncateSync(file, 0);
    await waitFor('the truncation seen', async () =>
      (await healthOf(url)).transcripts.restarts === 1 ? true : undefined,
    );
    appendFileSync(file, text(lines));
    await waitFor('the file read again', async () =>
      (await healthOf(url)).transcripts.calls.duplicates === 4 ? true : undefined,
    );
    await expectSameAsReport(url, r);
    expect(said).toContain(
      `${file} was truncated: read again from its start (calls already counted are not counted again)`,
    );
    expect(warned).toEqual([]);
  });

  it('lets go of a deleted file and follows it again when it is written anew, counting no call twice', async () => {
    const { project, url } = await watching();
    const file = join(project, sessions.loop.name);
    const lines = sessions.loop.lines;
    const half = indexOf(
      lines,
      'api-request',
      indexOf(lines, 'api-request', indexOf(lines, 'api-request') + 1) + 1,
    );
    writeFileSync(file, text(lines.slice(0, half)));
    await stateWith(url, 2);
    unlinkSync(file);
    await waitFor('the file let go', async () =>
      (await healthOf(url)).transcripts.files === 0 ? true : undefined,
    );
    writeFileSync(file, text(lines));
    await expectSameAsReport(url, await report());
    expect((await healthOf(url)).transcripts.calls.duplicates).toBe(2);
    expect(warned).toEqual([]);
  });
});
