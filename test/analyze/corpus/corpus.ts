// The ground-truth corpus: every event on every scheme and format it applies to, repeated with other seeds,
// plus controls with no event. Pure and seeded; the runner sends it, the scorer checks what the report said.

import type { Format, Style } from './conversation.js';
import { CONTROL, EVENTS, type EventDef } from './events.js';
import type { PlannedRequest, Scheme } from './session.js';

export const SCHEMES: readonly Scheme[] = [
  'anthropic',
  'gpt-5.4',
  'gpt-5.5',
  'gpt-5.6-implicit',
  'gpt-5.6-explicit',
];

/** One session (or a group of sessions that belong together, like two strangers interleaved). */
export interface CorpusSession {
  name: string;
  event: string;
  scheme: Scheme;
  format: Format;
  style: Style;
  /** Which capturing proxy it goes through. */
  capture: 'hashes' | 'full';
  requests: PlannedRequest[];
}

export interface CorpusOptions {
  /** Sessions per event on Anthropic (one format) and per event and format on each OpenAI scheme. */
  anthropicReps?: number;
  openaiReps?: number;
  /** Control sessions per scheme and format. */
  controls?: number;
  seed?: number;
  /** Only these events (for a quick look at one). */
  only?: readonly string[];
}

const formatsOf = (scheme: Scheme): Format[] =>
  scheme === 'anthropic' ? ['anthropic'] : ['chat', 'responses'];

/** Generates the corpus. The same options always give the same sessions, byte for byte. */
export function generateCorpus(options: CorpusOptions = {}): CorpusSession[] {
  const out: CorpusSession[] = [];
  let n = 0;
  const base = options.seed ?? 1;
  const add = (event: EventDef, scheme: Scheme, format: Format, rep: number) => {
    n++;
    const name = `${scheme}/${format}/${event.name}/${rep}`;
    // Half the Anthropic sessions are shaped like Claude Code's, half the Responses ones like Codex's.
    const client = Math.floor(n / 2) % 2 === 1;
    const style =
      client && format === 'anthropic' ? 'claude-code' : client && format === 'responses' ? 'codex' : 'plain';
    const requests = event.build({ name, scheme, format, rep, style, seed: base * 100_000 + n * 17 });
    out.push({
      name,
      event: event.name,
      scheme,
      format,
      style,
      capture: n % 2 ? 'hashes' : 'full',
      requests,
    });
  };
  for (const scheme of SCHEMES) {
    const reps = scheme === 'anthropic' ? (options.anthropicReps ?? 4) : (options.openaiReps ?? 1);
    for (const format of formatsOf(scheme)) {
      for (const event of [...EVENTS, CONTROL]) {
        if (options.only && !options.only.includes(event.name)) continue;
        if (!event.applies(scheme, format)) continue;
        const times = event === CONTROL ? (options.controls ?? reps * 3) : reps;
        for (let rep = 0; rep < times; rep++) add(event, scheme, format, rep);
      }
    }
  }
  return out;
}
