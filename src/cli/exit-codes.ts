// The CLI's exit codes, the same for every command (docs/cli.md).
// Never use another number: scripts and CI gates depend on these three.

export const EXIT_OK = 0;
/** A finding that fails a gate (or, for `diff`, prefixes that diverge). */
export const EXIT_FINDING = 1;
/** Bad usage or unreadable input. */
export const EXIT_USAGE = 2;
