// Whether a process id names a live process, for lock files that record their holder's pid.
// Sends signal 0 only: it never signals, waits or reads anything else.

/** Whether process `pid` is alive (a signal 0 reaches it, or it exists under another user). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
