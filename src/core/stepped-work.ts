// Drives a stepped computation (a pure-core generator that yields between bounded pieces of work, such as
// PrefixBuilder.parseSteps) for a shell (the proxy's request path, the capture writer's lines): pieces run for
// about `budgetMs`, then the next turn of the event loop, so other clients' streams move. It never changes what
// the computation returns, and the pure core never imports it (it reads a clock and sets timers).

/** Runs `work` to its end, giving the event loop back every `budgetMs` (time is read here, not in the core). */
export function runStepped<T>(
  work: Generator<void, T>,
  budgetMs = 4,
  now: () => number = () => performance.now(),
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const slice = () => {
      const t0 = now();
      try {
        for (;;) {
          const r = work.next();
          if (r.done) {
            resolve(r.value);
            return;
          }
          if (now() - t0 >= budgetMs) break;
        }
      } catch (err) {
        reject(err);
        return;
      }
      setImmediate(slice);
    };
    slice();
  });
}
