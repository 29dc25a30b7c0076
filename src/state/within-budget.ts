// Waits for a promise at most a given time: how the proxy bounds what it waits for the shared state.
// It never cancels the work and never rejects: late or failed work is reported as such.

export const LATE = Symbol('late');

/** The promise's value, or {@link LATE} when it took longer than `ms` (it may still settle later). */
export function withinBudget<T>(work: Promise<T>, ms: number): Promise<T | typeof LATE> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<typeof LATE>((resolve) => {
    timer = setTimeout(() => resolve(LATE), ms);
    timer.unref();
  });
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}
