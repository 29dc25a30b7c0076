// The one decision shape of every check cacheward gives a caller (stale guard, tool gate, reply validation,
// fork outcome, fork parity): `ok` says whether it holds, `reason` says why not in words a person can act on.

/** A check that held (with what it found), or did not (and why). */
export type Decision<T extends object = object> = ({ ok: true } & T) | { ok: false; reason: string };
