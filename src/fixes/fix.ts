// What a fix is, the registry of fixes by name, and the fail-open pipeline the proxy and the replay gate
// share: a fix declares byte patches and the pipeline applies them; a fix that throws (or patches out of
// range) means the original bytes go out, untouched, and the failure is recorded. Never a byte outside the
// declared patches changes.

import type { Relation } from '../conversation/conversation-store.js';
import { CachewardError } from '../core/errors.js';
import { drainSteps } from '../core/steps.js';
import type { Prefix } from '../prefix/build-prefix.js';
import { applyPatches, type BytePatch, type ClientEdit, PatchTrail } from './byte-patch.js';
import type { DeclaredChange, FixNote } from './fix-note.js';
import { isWithdrawn } from './withdrawal.js';

export type { BytePatch, ClientEdit } from './byte-patch.js';
export type { DeclaredChange, FixNote } from './fix-note.js';

/**
 * What a fix sees of the exchange besides the body. Time is a parameter, never read from a clock. State
 * follows the conversation: a fix gets the state its parent request left (a fork: its parent's state at
 * the fork point; a sibling or a new conversation: a fresh one).
 */
export interface FixContext {
  provider: 'anthropic' | 'openai';
  route: string;
  now: number;
  /** The conversation model's answer for this request. */
  conversation: string;
  relation: Relation;
  /** The session label, when the request carries one. */
  label?: string;
}

/** A request as a fix receives it: the bytes, their prefix model, and the request headers that matter. */
export interface FixRequest {
  body: Buffer;
  prefix: Prefix;
  /** Lower-case header names; a fix may change `anthropic-beta`. */
  headers: Readonly<Record<string, string>>;
}

/**
 * What a fix returns: the byte patches it makes to the body it received (none when it changed nothing;
 * sorted, apart, and in that body's offsets), header changes, and its notes. Every byte no patch names is
 * forwarded as the client sent it: a fix never writes the body whole.
 */
export interface FixResult<S> {
  patches?: BytePatch[];
  headers?: Record<string, string>;
  state: S;
  notes: string[];
  /** What the fix changed, declared, so the replay gate can tell declared changes from harm. */
  changes?: DeclaredChange[];
}

/** A pure request rewrite: `(request, conversationState, context) → { request, state, notes }`. */
export interface Fix<S = unknown> {
  readonly name: string;
  readonly description: string;
  initialState(): S;
  apply(request: FixRequest, state: S, context: FixContext): FixResult<S>;
  /**
   * {@link apply} in bounded steps, for a fix whose reading of a huge history is long: the pipeline runs
   * this instead when present, between turns of a shell's event loop. The same result as `apply`.
   */
  applySteps?(request: FixRequest, state: S, context: FixContext): Generator<void, FixResult<S>>;
}

/**
 * The fixes cacheward knows, by name. `order` is the order they run in whatever order they are named
 * (fixes it does not list run after, in the order named): a fix that reshapes the history runs before
 * one that inserts messages into it, so the insertions stay where they belong.
 */
export class FixRegistry {
  private readonly fixes = new Map<string, Fix>();
  constructor(private readonly order: readonly string[] = []) {}

  register(fix: Fix): this {
    this.fixes.set(fix.name, fix as Fix);
    return this;
  }

  get(name: string): Fix | undefined {
    return this.fixes.get(name);
  }

  names(): string[] {
    return [...this.fixes.keys()];
  }

  /**
   * The fixes for a list of names or fix objects, in the registry's order (whatever order they were
   * given; unordered ones after, as given). A fix object takes the place of the registered fix of its
   * name, so `ttlFix('5m')` runs where `ttl` runs. Throws naming any unknown name and the known ones.
   */
  resolve(names: ReadonlyArray<string | Fix>): Fix[] {
    // A plain-JS caller's `fixes: 'tools-freeze'` would otherwise be read letter by letter.
    if (!Array.isArray(names))
      throw new UnknownFixError(
        `fixes must be a list of fix names or fix objects, e.g. ['tools-freeze'], not ${JSON.stringify(names)}`,
      );
    const rank = (n: string) => {
      const i = this.order.indexOf(n);
      return i < 0 ? this.order.length : i;
    };
    const chosen = new Map<string, Fix>();
    for (const n of names) {
      if (typeof n !== 'string') {
        chosen.set(n.name, n);
        continue;
      }
      if (chosen.has(n)) continue;
      const fix = this.fixes.get(n);
      if (!fix) {
        const known = this.names();
        throw new UnknownFixError(
          `unknown fix "${n}"; known fixes: ${known.length ? known.join(', ') : '(none yet)'}`,
        );
      }
      chosen.set(n, fix);
    }
    return [...chosen.values()].sort((a, b) => rank(a.name) - rank(b.name));
  }
}

export class UnknownFixError extends CachewardError {
  constructor(message: string) {
    super('CW_UNKNOWN_FIX', message);
  }
}

/** The outcome of running the pipeline on one request. */
export interface PipelineResult {
  body: Buffer;
  /** The prefix of `body` (the client's own when nothing changed): built once, handed to every stage. */
  prefix: Prefix;
  headers: Record<string, string>;
  changed: boolean;
  notes: FixNote[];
  states: Map<string, unknown>;
  /** Every change the fixes declared, in order (insert indices refer to the final forwarded messages). */
  changes: DeclaredChange[];
  /** Where the forwarded body differs from the client's, in the client's bytes: every other byte is copied. */
  edits: ClientEdit[];
}

/**
 * Runs `fixes` in order. Each gets the previous one's output (its patches applied), re-parsed by `reparse`
 * (with the headers as the fixes left them, so the prefix knows an added beta). A fix withdrawn for this
 * model in this conversation (withdrawal.ts) is skipped. If any throws, or patches outside its body, the
 * original body and headers go out and the failure is the one note that says so; states stay as they were.
 */
export function runFixes(
  fixes: readonly Fix[],
  request: FixRequest,
  states: ReadonlyMap<string, unknown>,
  context: FixContext,
  reparse: (body: Buffer, headers: Readonly<Record<string, string>>) => Prefix,
): PipelineResult {
  return drainSteps(runFixesSteps(fixes, request, states, context, (b, h) => at(reparse(b, h))));
}

/** A value as a stepped computation of no steps. */
export function* at<T>(value: T): Generator<void, T> {
  yield* [];
  return value;
}

/**
 * {@link runFixes} in bounded steps: a re-parse (`reparse` stepped, e.g. `PrefixBuilder.parseSteps`) yields
 * between its pieces, so a shell can spread a huge body's fix stage over turns of its event loop.
 */
export function* runFixesSteps(
  fixes: readonly Fix[],
  request: FixRequest,
  states: ReadonlyMap<string, unknown>,
  context: FixContext,
  reparse: (body: Buffer, headers: Readonly<Record<string, string>>) => Generator<void, Prefix>,
): Generator<void, PipelineResult> {
  let current = request;
  const headers: Record<string, string> = { ...request.headers };
  const notes: FixNote[] = [];
  const next = new Map(states);
  const changes: DeclaredChange[] = [];
  const trail = new PatchTrail(request.body.length);
  const model = request.prefix.model;
  let changed = false;
  for (const fix of fixes) {
    if (isWithdrawn(states, fix.name, model)) {
      notes.push({
        fix: fix.name,
        changed: false,
        notes: [`off in this conversation on ${model || 'this model'}: the provider refused it earlier`],
      });
      continue;
    }
    try {
      const state = next.has(fix.name) ? next.get(fix.name) : fix.initialState();
      const out = fix.applySteps
        ? yield* fix.applySteps(current, state, context)
        : fix.apply(current, state, context);
      next.set(fix.name, out.state);
      const patches = out.patches ?? [];
      const body = patches.length ? applyPatches(current.body, patches) : current.body;
      const bodyChanged = body !== current.body && !body.equals(current.body);
      const headerChanged =
        out.headers !== undefined && Object.entries(out.headers).some(([k, v]) => headers[k] !== v);
      if (out.headers) Object.assign(headers, out.headers);
      if (bodyChanged) {
        trail.apply(patches);
        current = { body, prefix: yield* reparse(body, headers), headers: { ...headers } };
      } else if (headerChanged) current = { ...current, headers };
      notes.push({
        fix: fix.name,
        changed: bodyChanged || headerChanged,
        notes: out.notes,
        ...(out.changes?.length ? { changes: out.changes } : {}),
        ...(bodyChanged
          ? { patches: patches.map((p): [number, number, number] => [p.start, p.end, byteLength(p)]) }
          : {}),
      });
      if (out.changes) changes.push(...out.changes);
      changed ||= bodyChanged || headerChanged;
    } catch (err) {
      return {
        body: request.body,
        headers: { ...request.headers },
        changed: false,
        notes: [
          {
            fix: fix.name,
            changed: false,
            notes: ['failed: the original request was forwarded untouched'],
            error: String(err),
          },
        ],
        states: new Map(states),
        changes: [],
        edits: [],
        prefix: request.prefix,
      };
    }
  }
  return {
    body: current.body,
    prefix: current.prefix,
    headers,
    changed,
    notes,
    states: next,
    changes,
    edits: changed ? trail.edits() : [],
  };
}

const byteLength = (p: BytePatch) => (typeof p.text === 'string' ? Buffer.byteLength(p.text) : p.text.length);
