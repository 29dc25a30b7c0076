// Where a forwarded body spliced from the client's stops sharing bytes with the parent request's forwarded
// body, known from the splices and the client's own count, not by comparing the bodies again. Pure; it never
// guesses: any condition the exact count needs that does not hold gives no answer (the parse counts itself).

import type { RequestBody } from '../wire/request-body.js';
import { splicedFrom } from './splice-body.js';

/**
 * A client body's forwarded twin: the body that went out, spliced from it (held weakly: only a twin the
 * builder still keeps is of use), and where its tail sits.
 */
interface Twin {
  forwarded: WeakRef<RequestBody>;
  head: number;
  tailFrom: number;
}

/** Longest spliced head compared byte for byte (the tools and system before the messages, typically). */
const MAX_HEAD_BYTES = 256 * 1024;

const twins = new WeakMap<RequestBody, Twin>();

/**
 * Remembers that `forwarded` went out for `client` when it was spliced from it (the next request's forwarded
 * body may then count its shared bytes from its client's); anything else is not remembered.
 */
export function rememberForwarded(client: RequestBody, forwarded: RequestBody): void {
  const s = splicedFrom(forwarded.bytes);
  if (s && s.source === client)
    twins.set(client, { forwarded: new WeakRef(forwarded), head: s.head, tailFrom: s.tailFrom });
}

/**
 * For `body`, spliced from `client`: the parent's forwarded body and how many leading bytes `body` shares
 * with it, when `client` was parsed from the parent's client body with its shared bytes counted (`origin`).
 * Both forwarded bodies are a head then their client's bytes from the same place (`tailFrom`): with equal
 * heads and clients equal up to at least that place, they share the head and then what the clients share
 * past it, exactly. `usable`: whether the parse can take the parent's forwarded body over (it is kept).
 */
export function forwardedShared(
  client: RequestBody,
  origin: { from: RequestBody; shared: number } | undefined,
  body: Buffer,
  usable: (forwarded: RequestBody) => boolean,
): { previous: RequestBody; previousSharedBytes: number } | undefined {
  const s = splicedFrom(body);
  if (!s || s.source !== client || !origin || s.head > MAX_HEAD_BYTES) return undefined;
  const twin = twins.get(origin.from);
  if (!twin || twin.tailFrom !== s.tailFrom || twin.head !== s.head || origin.shared < s.tailFrom)
    return undefined;
  const previous = twin.forwarded.deref();
  if (!previous || !usable(previous)) return undefined;
  const before = previous.bytes;
  if (before.length < s.head || !body.subarray(0, s.head).equals(before.subarray(0, s.head)))
    return undefined;
  return { previous, previousSharedBytes: s.head + origin.shared - s.tailFrom };
}
