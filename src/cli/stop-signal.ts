// When a long-running command (sim, proxy) should stop: SIGINT, SIGTERM, or its stdout closing (EPIPE).
// It only tells; the process ends only once the command has returned (closed and flushed), never before.

type Waiter = (reason: string) => void;
const waiters = new Set<Waiter>();

/** Resolves with the reason once the process is asked to stop. */
export function waitForStop(): Promise<string> {
  return new Promise((resolve) => {
    const done = (reason: string) => {
      waiters.delete(done);
      process.off('SIGINT', onInt);
      process.off('SIGTERM', onTerm);
      resolve(reason);
    };
    const onInt = () => done('SIGINT');
    const onTerm = () => done('SIGTERM');
    waiters.add(done);
    process.once('SIGINT', onInt);
    process.once('SIGTERM', onTerm);
  });
}

/** Asks every waiting command to stop; false when none is waiting (the caller then ends the process). */
export function requestStop(reason: string): boolean {
  if (!waiters.size) return false;
  for (const w of [...waiters]) w(reason);
  return true;
}

/**
 * For the executable, once the command has returned (everything closed, flushed and said): what a library
 * leaves in the event loop past that (the OpenTelemetry exporter's retry timers against a collector that
 * does not answer, for up to its 5 s timeout) does not keep the process alive beyond `graceMs`.
 */
export function endWhenIdle(graceMs = 100): void {
  setTimeout(() => process.exit(), graceMs).unref();
}
