// `cacheward watch` on a session resumed long after its last call: its history must come from the file, however
// old, as the report has it. The lines are the pinned (older) Claude Code's own, from a real tool loop run at the
// start of this file, their times moved: one session ending two hours ago, another still under way, then one
// more call (a cache miss) appended to the old one as Claude Code appends it on resume.

import {
  appendFileSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type CachewardWatch, startWatch } from '../../src/watch/create-watch.js';
import { startAgentStack } from '../clients/agent-harness.js';
import { dir, script } from '../clients/claude-scenarios.js';
import { reportJson } from '../clients/transcript-parity.js';
import { healthOf, stateWith } from './watch-harness.js';

type Json = Record<string, unknown>;

/** Two real sessions of the pinned Claude Code (messages and usage only), each a file name and its records. */
const runs: Array<{ name: string; lines: Json[] }> = [];

beforeAll(async () => {
  const stack = await startAgentStack({ script });
  try {
    for (const project of ['old', 'busy']) {
      const cwd = dir(stack, project);
      writeFileSync(join(cwd, 'notes.txt'), 'the secret is 42\n');
      const r = await stack.run('claude', {
        claude: 'pinned',
        prompt: 'LOOP-TASK read, count and write',
        cwd,
        args: ['--allowedTools', 'Read', 'Bash(wc:*)', 'Write'],
      });
      expect(r.exitCode, r.stderr).toBe(0);
      const projects = join(r.home, '.claude/projects');
      const [folder] = readdirSync(projects).filter((f) => f.endsWith(`-${project}`));
      const [file] = readdirSync(join(projects, folder as string)).filter((f) => f.endsWith('.jsonl'));
      const path = join(projects, folder as string, file as string);
      const lines = readFileSync(path, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Json);
      runs.push({ name: basename(path), lines });
    }
  } finally {
    await stack.close();
  }
}, 180_000);

/** The records with every time moved so that the last one is `endsAgo` ms before now. */
function endingAgo(lines: Json[], endsAgo: number): Json[] {
  const times = lines.map((l) => Date.parse(l.timestamp as string)).filter((t) => Number.isFinite(t));
  const shift = Date.now() - endsAgo - Math.max(...times);
  return lines.map((l) =>
    typeof l.timestamp === 'string'
      ? { ...l, timestamp: new Date(Date.parse(l.timestamp) + shift).toISOString() }
      : l,
  );
}

const text = (lines: Json[]) => lines.map((l) => `${JSON.stringify(l)}\n`).join('');

/**
 * The next turn as the pinned Claude Code writes it on resume: the user's prompt, then the response, whose usage
 * says the provider read nothing from the cache and wrote the whole prompt (the entry expired long ago).
 */
function resumedTurn(lines: Json[]): Json[] {
  const prompt = lines.findLast(
    (l) => l.type === 'user' && typeof (l.message as Json | undefined)?.content === 'string',
  ) as Json;
  const answer = lines.findLast((l) => l.type === 'assistant') as Json;
  const now = Date.now();
  const user = {
    ...prompt,
    uuid: crypto.randomUUID(),
    parentUuid: answer.uuid,
    timestamp: new Date(now).toISOString(),
    message: { role: 'user', content: 'RESUMED-TASK one more question' },
  };
  const message = answer.message as Json;
  const usage = message.usage as Json;
  const whole =
    Number(usage.cache_read_input_tokens ?? 0) + Number(usage.cache_creation_input_tokens ?? 0) + 40;
  return [
    user,
    {
      ...answer,
      uuid: crypto.randomUUID(),
      parentUuid: user.uuid,
      timestamp: new Date(now + 2_000).toISOString(),
      requestId: `req_resumed${now}`,
      message: {
        ...message,
        id: `msg_resumed${now}`,
        content: [{ type: 'text', text: 'Resumed answer.' }],
        stop_reason: 'end_turn',
        usage: {
          ...usage,
          input_tokens: 3,
          cache_read_input_tokens: 0,
          cache_creation_input_tokens: whole,
          ...(usage.cache_creation
            ? { cache_creation: { ephemeral_5m_input_tokens: whole, ephemeral_1h_input_tokens: 0 } }
            : {}),
        },
      },
    },
  ];
}

describe('cacheward watch on a session resumed long after its last call', () => {
  let root = '';
  let watch: CachewardWatch | undefined;

  afterEach(async () => {
    await watch?.close();
    watch = undefined;
    rmSync(root, { recursive: true, force: true });
  });

  it('relates the resumed call to the history in its file, however old, as the report does', async () => {
    const [old, busy] = runs as [(typeof runs)[0], (typeof runs)[0]];
    root = mkdtempSync(join(tmpdir(), 'cacheward-watch-resume-'));
    const projects = join(root, 'projects');
    const oldFile = join(projects, '-work-old', old.name);
    mkdirSync(join(projects, '-work-old'), { recursive: true });
    mkdirSync(join(projects, '-work-busy'), { recursive: true });
    // Both files were written just now (a copy, a sync): both are read at start. The old session's calls ended
    // two hours ago; the busy one's a minute ago, after the --since cutoff (shown), so the analysis has gone on
    // for more than the cache's hour past the old session's last call when it is resumed.
    writeFileSync(oldFile, text(endingAgo(old.lines, 2 * 3_600_000)));
    writeFileSync(join(projects, '-work-busy', busy.name), text(endingAgo(busy.lines, 60_000)));
    const before = await reportJson([projects]);
    const busyCalls = before.requests.filter((r) => r.time >= Date.now() - 600_000).length;
    expect(busyCalls).toBeGreaterThan(0);
    watch = await startWatch({
      paths: [projects],
      sinceMs: 600_000,
      settleMs: 30_000,
      pollMs: 50,
      rescanMs: 500,
      logger: { info: () => {}, warn: () => {} },
    });
    await watch.start();
    await stateWith(watch.url, busyCalls);

    appendFileSync(oldFile, text(resumedTurn(old.lines)));
    const state = await stateWith(watch.url, busyCalls + 1);
    const report = await reportJson([projects]);
    const resumed = report.requests.reduce((a, b) => (b.time > a.time ? b : a));
    // What the report says of it: the old conversation's next turn, its cache entry expired.
    expect([resumed.relation, resumed.miss?.cause]).toEqual(['continues', 'ttl_expired']);
    expect(resumed.turn).toBeGreaterThan(1);
    const row = state.requests.find((r) => r.id === resumed.id);
    expect([row?.session, row?.relation, row?.turn, row?.cause, row?.readTokens, row?.writtenTokens]).toEqual(
      [
        resumed.session,
        resumed.relation,
        resumed.turn,
        resumed.miss?.cause,
        resumed.usage?.cacheRead,
        resumed.usage?.cacheWrite,
      ],
    );
    expect(row?.cost).toBeCloseTo(resumed.cost?.total ?? Number.NaN, 9);
    expect(row?.waste).toBeCloseTo(resumed.miss?.waste ?? Number.NaN, 9);
    // The old session's calls were read at start for context, forgotten as the busy one went on, and handed on
    // again when its file grew.
    expect((await healthOf(watch.url)).transcripts.calls.recalled).toBeGreaterThan(0);
  });
});
