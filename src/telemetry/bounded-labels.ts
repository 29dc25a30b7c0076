// Keeps a metric label's values bounded: names the price table knows stay themselves, a few unknown
// ones are let through as seen (capped in length), and every later unknown one is `other`. Pure data; no I/O.

import { capLabel } from '../core/cap-label.js';

export class BoundedLabel {
  private readonly seen = new Set<string>();

  /**
   * @param known maps a value to its canonical name when it is one of the known ones
   * @param unknownSlots how many distinct unknown values keep their own series
   */
  constructor(
    private readonly known: (value: string) => string | undefined,
    private readonly unknownSlots = 16,
  ) {}

  of(raw: string | undefined): string {
    if (!raw) return 'unknown';
    const k = this.known(raw);
    if (k) return k;
    const value = capLabel(raw);
    if (this.seen.has(value)) return value;
    if (this.seen.size < this.unknownSlots) {
      this.seen.add(value);
      return value;
    }
    return 'other';
  }
}
