// `cacheward report PATH` and `cacheward whatif PATH`: what happened, what it cost, and what it would have
// cost with other settings, from captures or agent transcripts. Thin shells over analyzePaths; warnings and
// progress go to stderr, never into the report on stdout; they never write to the inputs.

import { stat } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { Command } from 'commander';
import type { AnalysisResult } from '../../analyze/analyze-captures.js';
import { formatUsd } from '../../analyze/describe-miss.js';
import { type PriceRow, PriceTable } from '../../analyze/price-table.js';
import { captureFiles } from '../../capture/capture-reader.js';
import { defaultCaptureDir } from '../../capture/default-dir.js';
import { InputError } from '../../core/errors.js';
import { fixRegistry } from '../../fixes/registry.js';
import { replayCaptures } from '../../replay/replay-captures.js';
import { tuneHeapForAnalysis } from '../../report/analysis-heap.js';
import { analyzePaths } from '../../report/analyze-paths.js';
import { renderHtmlReport } from '../../report/html-report.js';
import { loadPriceFile } from '../../report/price-file.js';
import { renderTerminalReport } from '../../report/terminal-report.js';
import { type Agent, agentFolder, isFolder } from '../../sources/agent-folders.js';
import { captureInputs } from '../capture-inputs.js';
import { EXIT_OK } from '../exit-codes.js';
import { FAIL_ON_HELP, parseThreshold, reportThresholds } from '../fail-on.js';
import { type CliIO, styles } from '../io.js';
import { parseCount } from '../option-values.js';
import { readProgress } from '../read-progress.js';
import { replaceFileWhole } from '../replace-file.js';
import { nothingReplayed } from '../replay-inputs.js';
import { signedUsd } from '../signed-usd.js';
import { PRICES_HELP } from './prices.js';

/** The shortcuts to the agents' own transcript folders. */
interface SourceOptions {
  claudeCode?: boolean;
  codex?: boolean;
}

interface ReportOptions extends SourceOptions {
  json?: boolean;
  html?: string;
  prices?: string;
  misses: string;
  failOn: string[];
  perSession?: boolean;
  zdr?: boolean;
}

/**
 * The paths to read: those given, plus the agents' folders the shortcuts name. With neither, the default
 * capture folder when it holds captures, else every agent transcript folder that exists.
 */
async function sourcePaths(paths: readonly string[], opts: SourceOptions, io: CliIO): Promise<string[]> {
  const out = [...paths];
  const agents: Agent[] = [
    ...(opts.claudeCode ? (['claude-code'] as const) : []),
    ...(opts.codex ? (['codex'] as const) : []),
  ];
  for (const agent of agents) {
    const folder = agentFolder(agent);
    if (!(await isFolder(folder)))
      throw new InputError(
        `--${agent}: ${folder} does not exist (${AGENT_NAMES[agent]} writes its sessions there; set ${AGENT_ENV[agent]} if it lives elsewhere)`,
      );
    out.push(folder);
  }
  if (out.length) return out;
  const captures = defaultCaptureDir();
  const present: Agent[] = [];
  for (const agent of ['claude-code', 'codex'] as const)
    if (await isFolder(agentFolder(agent))) present.push(agent);
  const found = present.map((agent) => agentFolder(agent));
  if ((await isFolder(captures)) && (await captureFiles(captures).catch(() => [])).length) {
    const also = present.length
      ? `; the agents' own transcripts are not read without ${present.map((a) => `--${a}`).join(' or ')}`
      : '';
    io.err(`cacheward: reading the captures in ${captures}${also}`);
    return [captures];
  }
  if (!found.length)
    throw new InputError(
      `no path given, and nothing to read where cacheward looks by default: no captures in ${captures}, no ${agentFolder('claude-code')}, no ${agentFolder('codex')}; pass a capture folder or an agent's transcripts`,
    );
  io.err(`cacheward: reading ${found.join(' and ')} (no captures in ${captures})`);
  return found;
}

const AGENT_NAMES: Record<Agent, string> = { 'claude-code': 'Claude Code', codex: 'Codex' };
const AGENT_ENV: Record<Agent, string> = { 'claude-code': 'CLAUDE_CONFIG_DIR', codex: 'CODEX_HOME' };
const CLAUDE_CODE_HELP =
  "read Claude Code's own transcripts ($CLAUDE_CONFIG_DIR/projects, else ~/.claude/projects)";
const CODEX_HELP = "read Codex's own session rollouts ($CODEX_HOME/sessions, else ~/.codex/sessions)";
const PATHS_HELP =
  "capture files or folders (cacheward proxy --dir), or agent transcripts: ~/.claude/projects, a project folder, one session file, ~/.codex/sessions or a folder below it. With no path: the default capture folder if it holds captures, else the agents' transcript folders";

/** The price table, with the rows of `--prices FILE` when one is given. */
export async function prices(file: string | undefined): Promise<PriceTable> {
  try {
    return new PriceTable(file ? await loadPriceFile(file) : []);
  } catch (err) {
    throw new InputError((err as Error).message);
  }
}

async function run(
  paths: string[],
  io: CliIO,
  prices: PriceTable,
  ttlOverride?: number,
  keepRequests = true,
  zdr = false,
): Promise<AnalysisResult> {
  const files = await captureInputs(paths);
  // This process only analyzes from here: a heap sized for that (see analysis-heap.ts).
  tuneHeapForAnalysis();
  // One line over all the inputs on a terminal (a whole ~/.claude is thousands of files), cleared at the end.
  const shown = io.color === false ? undefined : await readProgress(files);
  let warned = 0;
  const result = await analyzePaths(files, {
    prices,
    keepRequests,
    zdr,
    ...(ttlOverride !== undefined ? { ttlOverride } : {}),
    onWarning: (w) => {
      shown?.done();
      warned++;
      io.err(`cacheward: warning: ${w}`);
    },
    ...(shown ? { onProgress: shown.onProgress } : {}),
  }).finally(() => shown?.done());
  if (!result.generatedFrom.records)
    throw new InputError(
      `${paths.join(', ')}: no capture records or transcript requests could be read (${
        warned
          ? `${result.generatedFrom.skippedLines} line${result.generatedFrom.skippedLines === 1 ? '' : 's'} skipped, see the warnings`
          : 'none of their lines is a record'
      })`,
    );
  if (!result.totals.requests)
    throw new InputError(
      `${paths.join(', ')}: ${result.generatedFrom.records} capture records, none of them a prompt request (POST /v1/messages, /v1/chat/completions or /v1/responses); nothing to report on`,
    );
  return result;
}

/** `--html FILE` must be writable where it is asked for: checked before the analysis runs. */
async function checkHtmlTarget(file: string): Promise<void> {
  const folder = dirname(file);
  const s = await stat(folder).catch(() => undefined);
  if (!s?.isDirectory())
    throw new InputError(
      `--html ${file}: the folder ${folder} ${s ? 'is not a folder' : 'does not exist'}; create it first, or write the report elsewhere`,
    );
  const f = await stat(file).catch(() => undefined);
  if (f?.isDirectory())
    throw new InputError(`--html ${file}: that is a folder; name a file, e.g. ${file}/report.html`);
}

export function registerReport(program: Command, io: CliIO, setExit: (code: number) => void): void {
  program
    .command('report')
    .description('what happened and what it cost: every cache miss named, located and priced')
    .argument('[paths...]', PATHS_HELP)
    .option('--claude-code', CLAUDE_CODE_HELP)
    .option('--codex', CODEX_HELP)
    .option('--json', 'print the whole result as JSON (schema: docs/report-schema.md)')
    .option('--html <file>', 'also write a self-contained HTML report')
    .option('--prices <file>', 'a JSON list of dated price rows that add to or override the built-in table')
    .option('--misses <n>', 'how many of the costliest misses to list', '10')
    .option('--fail-on <threshold>', FAIL_ON_HELP, (v: string, all: string[]) => [...all, v], [])
    .option('--per-session', 'check each --fail-on threshold in every session instead of over the run')
    .option(
      '--zdr',
      'the OpenAI organization has Zero Data Retention: requests without a retention were in_memory',
    )
    .addHelpText('after', PRICES_HELP)
    .action(async (paths: string[], opts: ReportOptions) => {
      const maxMisses = parseCount('--misses', opts.misses);
      const thresholds = opts.failOn.map(parseThreshold);
      if (opts.perSession && !thresholds.length)
        throw new InputError(
          "--per-session checks each --fail-on threshold in every session: say which, e.g. --fail-on 'waste>5' --per-session",
        );
      if (opts.html) await checkHtmlTarget(opts.html);
      // Per-request rows feed the charts and the JSON; the terminal summary does without them (constant memory).
      const result = await run(
        await sourcePaths(paths, opts, io),
        io,
        await prices(opts.prices),
        undefined,
        Boolean(opts.json || opts.html),
        Boolean(opts.zdr),
      );
      if (opts.html) {
        try {
          // Whole or not at all: a failed write leaves the report there before as it was.
          await replaceFileWhole(opts.html, renderHtmlReport(result));
        } catch (err) {
          throw new InputError(
            `--html ${opts.html}: cannot write: ${(err as Error).message}; nothing there was changed`,
          );
        }
      }
      if (opts.json) io.out(JSON.stringify(result, null, 2));
      else {
        for (const line of renderTerminalReport(result, styles(io.color), maxMisses)) io.out(line);
        if (opts.html) io.out(`\nwrote ${opts.html}`);
      }
      setExit(reportThresholds(result, thresholds, Boolean(opts.perSession), io, Boolean(opts.json)));
    });

  program
    .command('whatif')
    .description("the same traffic's cost under other settings, from the same cache model, per session")
    .argument('[paths...]', PATHS_HELP)
    .option('--claude-code', CLAUDE_CODE_HELP)
    .option('--codex', CODEX_HELP)
    .option('--ttl <ttl>', 'set every breakpoint to this TTL: 5m or 1h')
    .option(
      '--fix <names>',
      'replay full-mode captures through these fixes (as cacheward replay) and price the difference',
    )
    .option('--prices <file>', 'dated price rows to add or override (format: cacheward prices --help)')
    .option('--json', 'print the comparison as JSON')
    .addHelpText(
      'after',
      "\nBoth sides are priced from the cache model's reads and writes, so they compare like with like; the\nreport's spend is priced from the provider's reported usage, and the two differ where the provider\nread or wrote otherwise than the model.",
    )
    .action(
      async (
        given: string[],
        opts: SourceOptions & { ttl?: string; fix?: string; prices?: string; json?: boolean },
      ) => {
        if (opts.ttl !== undefined && opts.ttl !== '5m' && opts.ttl !== '1h') {
          throw new InputError(`--ttl ${opts.ttl}: use 5m or 1h`);
        }
        const paths = await sourcePaths(given, opts, io);
        const table = await prices(opts.prices);
        if (opts.fix !== undefined) {
          await whatIfFixes(paths, opts.fix, opts.ttl === '5m' ? '5m' : '1h', table, io, Boolean(opts.json));
          setExit(EXIT_OK);
          return;
        }
        if (opts.ttl === undefined)
          throw new InputError('say what to change: --ttl 5m, --ttl 1h or --fix NAMES');
        const ttl = opts.ttl === '1h' ? 60 * 60_000 : 5 * 60_000;
        const base = await run(paths, io, table);
        const alt = await run(paths, io, table, ttl);
        const comparison = whatIfComparison(base, alt, table, opts.ttl);
        if (opts.json) io.out(JSON.stringify({ ttl: opts.ttl, ...comparison }, null, 2));
        else {
          const s = styles(io.color);
          io.out(
            s.bold(`cacheward whatif --ttl ${opts.ttl}: the same requests, every breakpoint at ${opts.ttl}`),
          );
          io.out(
            `  as sent (modelled): ${formatUsd(comparison.baseCost)}   with --ttl ${opts.ttl}: ${formatUsd(comparison.altCost)}   difference: ${signedUsd(comparison.altCost - comparison.baseCost)}`,
          );
          for (const line of modelledVersusReported(comparison.baseCost, base, comparison.leftOut))
            io.out(s.dim(line));
          io.out('');
          for (const x of comparison.sessions) {
            io.out(
              `  ${x.session.padEnd(30)} ${formatUsd(x.base).padStart(10)} -> ${formatUsd(x.alt).padStart(10)}  (${signedUsd(x.alt - x.base)})`,
            );
          }
        }
        setExit(EXIT_OK);
      },
    );
}

/** Why the modelled "as sent" figure is not the report's spend, with the amount between them. */
function modelledVersusReported(modelled: number, base: AnalysisResult, leftOut: number): string[] {
  const reported = base.totals.cost;
  const gap = modelled - reported;
  return [
    `  why this is not the report's spend (${formatUsd(reported)}): the report prices the usage the provider reported;`,
    '  both figures here price what the cache model says each request read and wrote, so they compare like',
    `  with like. Modelled minus reported: ${signedUsd(gap)}, where the provider read or wrote otherwise than the`,
    `  model (an unexplained miss, OpenAI's rounding)${leftOut ? `; ${leftOut} request${leftOut === 1 ? '' : 's'} left out (no price or no usage)` : ''}.`,
  ];
}

/** `whatif --fix`: the replay's re-written tokens without and with the fixes, priced per session. */
async function whatIfFixes(
  paths: string[],
  names: string,
  ttl: '5m' | '1h',
  table: PriceTable,
  io: CliIO,
  json: boolean,
): Promise<void> {
  let fixes: ReturnType<ReturnType<typeof fixRegistry>['resolve']>;
  try {
    fixes = fixRegistry(ttl).resolve(
      names
        .split(',')
        .map((f) => f.trim())
        .filter(Boolean),
    );
  } catch (err) {
    throw new InputError((err as Error).message);
  }
  const result = await replayCaptures(await captureInputs(paths), {
    fixes,
    onWarning: (w) => io.err(`cacheward: warning: ${w}`),
  });
  if (!result.requests) throw nothingReplayed(paths, result);
  const sessions = result.sessions.map((x) => {
    const p = table.lookup(x.model);
    const per = p ? (p.write5m - p.read) / 1e6 : null;
    return {
      session: x.session,
      model: x.model,
      rewrittenWithout: x.withoutFixes.rewritten,
      rewrittenWith: x.withFixes.rewritten,
      wasteWithout: per === null ? null : x.withoutFixes.rewritten * per,
      wasteWith: per === null ? null : x.withFixes.rewritten * per,
    };
  });
  if (json) {
    io.out(
      JSON.stringify(
        {
          fixes: fixes.map((f) => f.name),
          requests: result.requests,
          violations: result.violations,
          sessions,
        },
        null,
        2,
      ),
    );
    return;
  }
  const s = styles(io.color);
  io.out(
    s.bold(
      `cacheward whatif --fix ${fixes.map((f) => f.name).join(',')}: ${result.requests} captured requests replayed`,
    ),
  );
  for (const x of sessions) {
    io.out(
      `  ${x.session.padEnd(30)} re-written ${x.rewrittenWithout} -> ${x.rewrittenWith} tokens; waste ${formatUsd(x.wasteWithout)} -> ${formatUsd(x.wasteWith)}`,
    );
  }
  if (result.violations.length)
    io.out(
      s.yellow(
        `  ${result.violations.length} invariant violations: run cacheward replay --gate for the list`,
      ),
    );
}

/**
 * Prices both runs from the cache model's expected usage (not the provider's), so the two sides are the
 * same engine under two settings. Expected read/write come from each run's model; output stays as sent.
 */
export function whatIfComparison(
  base: AnalysisResult,
  alt: AnalysisResult,
  table: PriceTable,
  ttl: '5m' | '1h',
) {
  const modelled = (a: AnalysisResult, writeAt: (p: PriceRow, provider: string) => number) => {
    const bySession = new Map<string, number>();
    let leftOut = 0;
    for (const r of a.requests) {
      const price = table.lookup(r.model);
      if (!price || !r.usage || r.expectedRead === undefined) {
        leftOut++;
        continue;
      }
      const read = Math.min(r.expectedRead, r.usage.inputTotal);
      const written = Math.max(0, r.usage.cacheRead + r.usage.cacheWrite - read);
      const uncached = Math.max(0, r.usage.inputTotal - read - written);
      const cost =
        (uncached * price.input +
          written * writeAt(price, r.provider) +
          read * price.read +
          r.usage.output * price.output) /
        1e6;
      bySession.set(r.session, (bySession.get(r.session) ?? 0) + cost);
    }
    return { bySession, leftOut };
  };
  const asSent = modelled(base, (p, provider) => (provider === 'anthropic' ? p.write5m : p.input));
  const b = asSent.bySession;
  const a = modelled(alt, (p, provider) =>
    provider === 'anthropic' ? (ttl === '1h' ? p.write1h : p.write5m) : p.input,
  ).bySession;
  const sessions = [...new Set([...b.keys(), ...a.keys()])].map((session) => ({
    session,
    base: b.get(session) ?? 0,
    alt: a.get(session) ?? 0,
  }));
  return {
    baseCost: sessions.reduce((t, x) => t + x.base, 0),
    altCost: sessions.reduce((t, x) => t + x.alt, 0),
    sessions: sessions.sort((x, y) => y.alt - y.base - (x.alt - x.base)),
    /** Requests neither side could price (no price row, no usage, or no cache-model figure). */
    leftOut: asSent.leftOut,
  };
}
