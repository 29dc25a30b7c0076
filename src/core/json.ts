// The one JSON object type and object test every module shares (instead of a copy in each file).
// Types and a predicate only; nothing here parses or serializes.

/** A JSON object as parsed: members of any JSON type. */
export type Json = Record<string, unknown>;

/** Whether a parsed JSON value is an object (not null, not an array). */
export const isObj = (v: unknown): v is Json => v !== null && typeof v === 'object' && !Array.isArray(v);
