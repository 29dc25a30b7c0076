// Benchmark: `cacheward report` over a whole ~/.claude of Claude Code transcripts, against JSON.parse of the same
// bytes and JSON.parse of the requests they stand for (rebuilt, only the parse timed). The folder is generated from two real runs' transcripts (the newest Claude Code and the pinned 2.1.195,
// offline, a tool loop): their very records (shape, reminder and environment messages, request and response
// lines), varied per session (ids, working folder, prompt, tool results of random sizes and words, 2 to 300
// turns, idle gaps) with every hash and requestDigest recomputed, so the reader takes the paths it takes on a
// real ~/.claude: four sessions in five exact (request records), one in five from messages and usage.
// Run: npx tsup && npx tsx bench/transcripts.ts   (CACHEWARD_BENCH_MB=250 by default; under two minutes)
// CACHEWARD_BENCH_KEEP=1 keeps the generated folder.

import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { seededRandom } from '../src/sim/agent-conversation.js';
import {
  claudeCodeDigest,
  type DigestCheckpoint,
  MessageRef,
  RequestShape,
} from '../src/sources/claude-code-body.js';
import { stableHash, stableJsonWithoutMarkers } from '../src/sources/stable-hash.js';
import { startAgentStack } from '../test/clients/agent-harness.js';
import { dir, script } from '../test/clients/claude-scenarios.js';
import { type Json, machineLine } from './support.js';

const TARGET_MB = Number(process.env.CACHEWARD_BENCH_MB ?? 250);

const rnd = seededRandom(28);
const hex = (n: number) => Array.from({ length: n }, () => Math.floor(rnd() * 16).toString(16)).join('');
const uuid = () => `${hex(8)}-${hex(4)}-4${hex(3)}-a${hex(3)}-${hex(12)}`;
const WORDS =
  'cache prefix token request session tool result error file line function return value module build test'
    .split(' ')
    .concat(
      'const let import export async await index query table column number string object array'.split(' '),
    );
const text = (bytes: number) => {
  const out: string[] = [];
  let n = 0;
  while (n < bytes) {
    const w = WORDS[Math.floor(rnd() * WORDS.length)] as string;
    out.push(w);
    n += w.length + 1;
    if (rnd() < 0.08) out.push('\n');
  }
  return out.join(' ');
};

/** A real run's transcript, by role: the records every generated session is made of. */
interface Template {
  lines: Json[];
  head: Json[];
  /** The request records (the newest Claude Code); absent in an older version's transcript. */
  shape?: Json;
  blobs: Json[];
  request?: Json;
  text: Json;
  tool: Json;
  result: Json;
  final: Json;
  tail: Json[];
  sessionId: string;
  cwd: string;
  prompt: string;
}

async function realTranscript(claude: 'newest' | 'pinned'): Promise<Template> {
  const stack = await startAgentStack({ script });
  try {
    const cwd = dir(stack, 'loop');
    writeFileSync(join(cwd, 'notes.txt'), 'the secret is 42\n');
    const prompt = 'LOOP-TASK read, count and write';
    const run = await stack.run('claude', {
      claude,
      prompt,
      cwd,
      args: ['--allowedTools', 'Read', 'Bash(wc:*)', 'Write'],
    });
    if (run.exitCode !== 0) throw new Error(`claude exited ${run.exitCode}: ${run.stderr}`);
    const projects = join(run.home, '.claude/projects');
    const [folder] = readdirSync(projects);
    const [file] = readdirSync(join(projects, folder as string)).filter((f) => f.endsWith('.jsonl'));
    const lines = readFileSync(join(projects, folder as string, file as string), 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Json);
    const at = (f: (v: Json) => boolean) => lines.find(f) as Json;
    const content = (v: Json) => ((v.message as Json)?.content as Json[] | undefined) ?? [];
    const shapeAt = lines.findIndex((v) => v.type === 'api-request-shape');
    const headEnd = shapeAt >= 0 ? shapeAt : lines.findIndex((v) => v.type === 'assistant');
    const blobs = lines.filter((v) => v.type === 'api-request-blob');
    const lastAssistant = lines.findLastIndex((v) => v.type === 'assistant');
    return {
      lines,
      head: lines.slice(0, headEnd).filter((v) => v.type !== 'api-request-blob'),
      ...(shapeAt >= 0
        ? { shape: lines[shapeAt] as Json, request: at((v) => v.type === 'api-request') }
        : {}),
      blobs,
      text: at((v) => v.type === 'assistant' && content(v)[0]?.type === 'text'),
      tool: at((v) => v.type === 'assistant' && content(v)[0]?.type === 'tool_use'),
      result: at((v) => v.type === 'user' && content(v)[0]?.type === 'tool_result'),
      final: lines[lastAssistant] as Json,
      tail: lines.slice(lastAssistant + 1).filter((v) => v.type === 'last-prompt' || v.type === 'cost-state'),
      sessionId: String(lines.find((v) => typeof v.sessionId === 'string')?.sessionId),
      cwd,
      prompt,
    };
  } finally {
    await stack.close();
  }
}

/** The JSON text of each template record, made once. */
const texts = new WeakMap<object, string>();

/**
 * A copy of `value` with every `from` replaced by `to` in its strings, through its JSON text (every `from` here
 * is a path, an id or plain words, the same escaped or not).
 */
function replaced(value: Json, pairs: Array<[string, string]>): Json {
  let text = texts.get(value);
  if (text === undefined) {
    text = JSON.stringify(value);
    texts.set(value, text);
  }
  for (const [from, to] of pairs)
    if (text.includes(from)) text = text.split(from).join(JSON.stringify(to).slice(1, -1));
  return JSON.parse(text) as Json;
}

const runHash = (role: string, content: unknown[]) =>
  createHash('sha256').update(stableJsonWithoutMarkers({ content, role })).digest('hex');

/** One session's lines; returns them and how many requests they hold. */
function session(
  t: Template,
  index: number,
  turns: number,
  start: number,
): { lines: string[]; requests: number } {
  const sid = uuid();
  const cwd = `/home/dev/src/project-${index % 150}`;
  const prompt = `task ${index}: ${text(40 + Math.floor(rnd() * 300))}`;
  const pairs: Array<[string, string]> = [
    [t.sessionId, sid],
    [t.cwd, cwd],
    [t.prompt, prompt],
  ];
  let now = start;
  const iso = () => new Date(now).toISOString();
  const out: string[] = [];
  const emit = (v: Json) => out.push(JSON.stringify(v));
  let parent: string | null = null;
  const line = (template: Json, fields: Json = {}): Json => {
    const v = replaced(template, pairs);
    if ('timestamp' in v) v.timestamp = iso();
    if ('uuid' in v) {
      v.parentUuid = parent;
      v.uuid = uuid();
      parent = v.uuid as string;
    }
    return Object.assign(v, fields);
  };
  for (const h of t.head) emit(line(h));
  now += 60;
  const shape = (t.shape?.shape ?? { system: [], tools: [] }) as Json;
  if (t.shape) emit(line(t.shape));
  const requestShape = new RequestShape(shape.system as unknown[], shape.tools as unknown[]);
  // An older version's transcript records no system or tools: they still count in the usage.
  const shapeBytes = t.shape ? JSON.stringify(shape).length : 40_000;
  const messages: MessageRef[] = [];
  let tail: string[] = [];
  for (const b of t.blobs) {
    const blob = line(b);
    blob.hash = stableHash(blob.message);
    emit(blob);
    messages.push(new MessageRef(blob.message as Json));
    tail.push(blob.hash as string);
  }
  const params = (t.request?.params ?? {}) as Json;
  const { model, betas, ...rest } = params;
  let base: string | undefined;
  let checkpoint: DigestCheckpoint | undefined;
  let previous = 0;
  let idle = false;
  let requests = 0;
  for (let turn = 1; turn <= turns; turn++) {
    const id = uuid();
    if (t.request) {
      const markers = [
        ...((t.request.cacheControl as Json[]).filter((c) => (c.path as unknown[])[0] === 'system') as Array<{
          path: Array<string | number>;
          value: unknown;
        }>),
        { path: ['messages', messages.length - 1, 'content', 0], value: { type: 'ephemeral' } },
      ];
      const request: Json = {
        ...replaced(t.request, pairs),
        id,
        timestamp: iso(),
        ...(base ? { base, keep: messages.length - tail.length } : { keep: 0 }),
        tail,
        cacheControl: markers,
      };
      if (!base) delete request.base;
      const digested = claudeCodeDigest(
        {
          model: model as string,
          params: rest,
          betas: betas as string[],
          shape: requestShape,
          messages,
          markers,
          billing: '',
        },
        checkpoint,
      );
      request.requestDigest = digested.digest;
      checkpoint = digested.checkpoint;
      emit(request);
    }
    requests++;
    // Usage as a warm cache reports it: the previous request's prefix read, unless the cache went idle.
    const total = Math.round((shapeBytes + messages.reduce((n, m) => n + m.wire().length, 0)) / 4);
    const read = idle ? 0 : previous;
    const usage = {
      ...((t.text.message as Json).usage as Json),
      input_tokens: 0,
      cache_read_input_tokens: read,
      cache_creation_input_tokens: total - read,
      cache_creation: { ephemeral_1h_input_tokens: 0, ephemeral_5m_input_tokens: total - read },
      output_tokens: 20 + Math.floor(rnd() * 400),
    };
    previous = total;
    now += 800 + Math.floor(rnd() * 4_000);
    const messageId = `msg_${hex(24)}`;
    const requestId = `req_${hex(24)}`;
    const last = turn === turns;
    const blocks: Json[] = [];
    for (const template of last ? [t.final] : [t.text, t.tool]) {
      const v = line(template, t.request ? { requestId, requestRef: id } : { requestId });
      const m = v.message as Json;
      const block = { ...((m.content as Json[])[0] as Json) };
      if (block.type === 'text') block.text = text(20 + Math.floor(rnd() * 400));
      else block.id = `toolu_${hex(24)}`;
      v.message = { ...m, id: messageId, content: [block], usage };
      blocks.push(block);
      emit(v);
    }
    const assistant = new MessageRef({ role: 'assistant', content: blocks });
    if (last) break;
    messages.push(assistant);
    idle = rnd() < 0.04;
    now += 200 + Math.floor(rnd() * 20_000) + (idle ? 6 * 60_000 + rnd() * 30 * 60_000 : 0);
    const result = line(t.result);
    const resultBlock = {
      ...(((result.message as Json).content as Json[])[0] as Json),
      tool_use_id: blocks.at(-1)?.id,
      content: text(200 + Math.floor(rnd() * rnd() * 12_000)),
    };
    result.message = { role: 'user', content: [resultBlock] };
    emit(result);
    messages.push(new MessageRef({ role: 'user', content: [resultBlock] }));
    tail = [runHash('assistant', blocks), runHash('user', [resultBlock])];
    base = id;
  }
  for (const x of t.tail) emit(line(x));
  return { lines: out, requests };
}

function generate(
  newest: Template,
  pinned: Template,
  root: string,
): { bytes: number; sessions: number; requests: number } {
  let bytes = 0;
  let sessions = 0;
  let requests = 0;
  const start = Date.UTC(2026, 8, 1);
  while (bytes < TARGET_MB * 1024 * 1024) {
    // Many sessions are a question or two, most are short, a few run for hundreds of turns.
    const u = rnd();
    const turns =
      u < 0.5
        ? 1 + Math.floor(rnd() * 3)
        : u < 0.98
          ? 2 + Math.floor(-Math.log(1 - rnd()) * 10)
          : 100 + Math.floor(rnd() * 200);
    const t = sessions % 5 === 4 ? pinned : newest;
    const s = session(t, sessions, turns, start + Math.floor(rnd() * 90 * 86_400_000));
    const folder = join(root, `-home-dev-src-project-${sessions % 150}`);
    mkdirSync(folder, { recursive: true });
    const body = `${s.lines.join('\n')}\n`;
    writeFileSync(join(folder, `${uuid()}.jsonl`), body);
    bytes += Buffer.byteLength(body);
    sessions++;
    requests += s.requests;
  }
  return { bytes, sessions, requests };
}

/** The baseline: every line of every file read and JSON.parse'd, in a child of its own (its own peak RSS). */
const PARSE_CHILD = `
import { createReadStream, readdirSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { join } from 'node:path';
const root = process.argv[1];
const files = readdirSync(root, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.jsonl'));
const t0 = performance.now();
let lines = 0;
for (const f of files) {
  for await (const l of createInterface({ input: createReadStream(join(root, f)), crlfDelay: Infinity })) {
    if (l) { JSON.parse(l); lines++; }
  }
}
const ms = performance.now() - t0;
process.stdout.write(JSON.stringify({ ms, lines, peakRss: process.resourceUsage().maxRSS * 1024 }));
`;

function child(args: string[]): Json {
  const r = spawnSync(process.execPath, args, { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  if (r.status !== 0) throw new Error(`${args.join(' ')}: ${r.stderr}`);
  return JSON.parse(r.stdout) as Json;
}

const t0 = performance.now();
const newest = await realTranscript('newest');
const pinned = await realTranscript('pinned');
const home = mkdtempSync(join(tmpdir(), 'cacheward-bench-transcripts-'));
const root = join(home, '.claude/projects');
const made = generate(newest, pinned, root);
const mb = made.bytes / 1024 / 1024;
console.log(machineLine('transcripts'));
console.log(
  `a generated ~/.claude/projects: ${mb.toFixed(0)} MB, ${made.sessions} sessions, ${made.requests} requests (generated in ${((performance.now() - t0) / 1000).toFixed(1)} s; the machine is shared)`,
);
const parse = child(['--input-type=module', '-e', PARSE_CHILD, root]);
const report = child([join(import.meta.dirname, 'analyze-child.mjs'), root]);
const requests = child([join(import.meta.dirname, 'request-parse-child.mjs'), root]);
const row = (name: string, ms: number, rss: number) =>
  `  ${name.padEnd(34)} ${(ms / 1000).toFixed(1).padStart(6)} s  ${(mb / (ms / 1000)).toFixed(1).padStart(7)} MB/s  peak RSS ${(rss / 1024 / 1024).toFixed(0).padStart(5)} MB`;
console.log(row('JSON.parse of every line', parse.ms as number, parse.peakRss as number));
console.log(row('cacheward report (analyzePaths)', report.ms as number, report.peakRss as number));
console.log(`  requests analyzed: ${report.records} of ${made.requests}; misses named: ${report.misses}`);
// What the report reads is the requests the transcripts stand for, each as it was sent: far more bytes than
// the transcripts hold (a record names the messages it shares with the call before it).
const requestMb = (requests.bytes as number) / 1024 / 1024;
console.log(
  `  the ${requests.requests} requests as sent: ${requestMb.toFixed(0)} MB (${(requestMb / mb).toFixed(1)}x the transcripts); JSON.parse of them alone ${((requests.ms as number) / 1000).toFixed(1)} s, the report ${((report.ms as number) / (requests.ms as number)).toFixed(2)}x that`,
);
if (process.env.CACHEWARD_BENCH_KEEP) console.log(`kept ${home}`);
else rmSync(home, { recursive: true, force: true });
