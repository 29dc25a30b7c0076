// How often the provider refused a fixed request, per fix (the client's own bytes went out instead): for
// `/_cacheward/health` and the metrics. Memory only; its labels are the configured fixes' names.

export class FixRefusals {
  private readonly byFix = new Map<string, number>();

  /** One refusal of a request these fixes changed. */
  add(fixes: readonly string[]): void {
    for (const fix of fixes) this.byFix.set(fix, (this.byFix.get(fix) ?? 0) + 1);
  }

  /** Refusals so far, by fix (every configured fix, 0 when never refused). */
  counts(fixes: readonly string[]): Record<string, number> {
    return Object.fromEntries(fixes.map((f) => [f, this.byFix.get(f) ?? 0]));
  }

  metricsText(fixes: readonly string[]): string {
    if (!fixes.length) return '';
    const lines = [
      '# HELP cacheward_fix_refusals_total Fixed requests the provider refused (the client bytes went out instead), by fix.',
      '# TYPE cacheward_fix_refusals_total counter',
      ...fixes.map((f) => `cacheward_fix_refusals_total{fix="${f}"} ${this.byFix.get(f) ?? 0}`),
    ];
    return `${lines.join('\n')}\n`;
  }
}
