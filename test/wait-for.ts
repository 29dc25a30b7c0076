// Waits on a condition, looked at every few ms, with a deadline: a test waits for what it needs, never a fixed
// sleep. It fails naming what it waited for; it never passes because time ran out.

/**
 * Resolves with `check()`'s first value that is not false, undefined or null; rejects after `timeoutMs`. A
 * check that throws (a server not up yet) is looked at again, and its last error is named if time runs out.
 */
export async function waitFor<T>(
  what: string,
  check: () => T | false | undefined | null | Promise<T | false | undefined | null>,
  timeoutMs = 10_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== false && value !== undefined && value !== null) return value;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline)
      throw new Error(
        `waited ${timeoutMs} ms for ${what}, in vain${last ? ` (last error: ${String(last)})` : ''}`,
      );
    await new Promise((r) => setTimeout(r, 5));
  }
}
