// One miss as a report line: its session, turn and time to the millisecond, then the analyzer's sentence.
// It re-phrases nothing: the cause and its detail are the analyzer's own words.

import type { Miss } from '../analyze/analyze-captures.js';

/** `12:03:55.120`: sub-second, so two requests sent in one second keep their order on the page. */
export function clockTimeMs(ms: number): string {
  return new Date(ms).toISOString().slice(11, 23);
}

/** `main, turn 41, 12:03:55.120 — tools changed: …`: the sentence with its session named. */
export function missLine(m: Miss): string {
  const at = m.sentence.indexOf(' — ');
  const what = at >= 0 ? m.sentence.slice(at + 3) : m.sentence;
  return `${m.session}, turn ${m.turn}, ${clockTimeMs(m.time)} — ${what}`;
}
