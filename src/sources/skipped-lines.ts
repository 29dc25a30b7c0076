// The lines a transcript adapter skipped, said once per reason: the first with its own message, the rest
// counted into one closing line. Pure (it only calls the warning it is given); it never skips anything itself.

import { isObj, type Json } from '../core/json.js';
import type { LineWarning } from './source-request.js';

export class SkippedLines {
  private readonly byReason = new Map<string, { line: number; count: number }>();

  constructor(private readonly warn: LineWarning) {}

  /** Line `n` was skipped for `reason`: warned with `message` the first time, counted after that. */
  skip(reason: string, n: number, message: string): void {
    const s = this.byReason.get(reason);
    if (s) s.count++;
    else {
      this.byReason.set(reason, { line: n, count: 1 });
      this.warn(n, message);
    }
  }

  /**
   * Line `n` as a record with a string `type`, or undefined when it is blank or skipped: not JSON (torn), or
   * not a record of this agent (`what`, e.g. "a Codex rollout record").
   */
  record(text: string, n: number, what: string): (Json & { type: string }) | undefined {
    if (text.trim() === '') return undefined;
    let v: unknown;
    try {
      v = JSON.parse(text);
    } catch {
      this.skip('torn', n, `skipped a truncated or invalid line (${text.length} characters, not JSON)`);
      return undefined;
    }
    if (isObj(v) && typeof v.type === 'string') return v as Json & { type: string };
    this.skip('shape', n, `skipped a line that is not ${what}`);
    return undefined;
  }

  /** At the end of the file: one line per reason skipped more than once, at its first line. */
  end(): void {
    for (const [reason, s] of this.byReason)
      if (s.count > 1)
        this.warn(s.line, `and ${s.count - 1} more line${s.count === 2 ? '' : 's'} like it (${reason})`);
  }
}
