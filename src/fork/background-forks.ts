// BackgroundForks: runs forks beside a live parent safely: at most one pending per parent, no fork from a
// fork, results applied only if their source is unchanged, replies validated as data, bounded cancel and close.

import { AsyncLocalStorage } from 'node:async_hooks';
import type { Decision } from '../core/decision.js';
import { CachewardError } from '../core/errors.js';

/** How a fork ended, in the one decision shape: applied (`ok`), or why not. */
export type ForkOutcome =
  | { ok: true; status: 'applied'; value: unknown }
  | { ok: false; status: 'discarded' | 'failed' | 'cancelled'; reason: string };

const CANCELLED: ForkOutcome = {
  ok: false,
  status: 'cancelled',
  reason: 'the parent went on (or the runner closed) before the fork finished',
};

export interface BackgroundForksOptions {
  /** Forks pending at once per parent (default 1). */
  maxPendingPerParent?: number;
  /** After this many consecutive failures, no new fork starts (default 3). */
  maxConsecutiveFailures?: number;
  /** How long `cancel` and `close` wait for a fork to stop (default 2,000 ms). */
  cancelWaitMs?: number;
  /** Told about every outcome (discarded results, failures): the caller's log. */
  onOutcome?: (parent: string, outcome: ForkOutcome) => void;
}

/** A reply as the fork's model gave it (Anthropic content blocks). */
export interface ForkReply {
  content: Array<{ type: string; text?: string; name?: string; input?: unknown }>;
}

/** A usable reply: plain text, or the data of the one declared result call. */
export type ValidReply = { kind: 'text'; text: string } | { kind: 'result'; data: unknown };

/** What to run, when it may apply, and how: the options of {@link BackgroundForks.start}. */
export interface ForkTask<T> {
  /** The parent the fork belongs to (one live conversation). */
  parent: string;
  /** Runs the fork; it gets an abort signal and returns the fork's result. */
  run: (signal: AbortSignal) => Promise<T>;
  /** Asked at apply time: is the source the fork was computed from unchanged? */
  isCurrent: () => boolean;
  /** Writes the result. */
  apply: (value: T) => void | Promise<void>;
}

/** The fork may not start: forking is off, the parent has one pending, or this is itself a fork. */
export class ForkRefusedError extends CachewardError {
  constructor(message: string) {
    super('CW_FORK_REFUSED', message);
  }
}

/**
 * A reply is usable when it is non-empty text, or exactly one call of the declared result tool, whose
 * input is read as data (never executed). Anything else is invalid.
 */
export function validateReply(reply: ForkReply, resultTool?: string): Decision<ValidReply> {
  const calls = reply.content.filter((b) => b.type === 'tool_use');
  if (calls.length) {
    if (resultTool && calls.length === 1 && calls[0]?.name === resultTool)
      return { ok: true, kind: 'result', data: calls[0]?.input };
    return {
      ok: false,
      reason: `the reply called ${calls.map((c) => c.name).join(', ')}; only one ${resultTool ?? 'declared result'} call is accepted, as data`,
    };
  }
  const text = reply.content
    .filter((b) => b.type === 'text')
    .map((b) => b.text ?? '')
    .join('')
    .trim();
  return text ? { ok: true, kind: 'text', text } : { ok: false, reason: 'the reply is empty' };
}

interface Pending {
  parent: string;
  controller: AbortController;
  done: Promise<ForkOutcome>;
}

const insideFork = new AsyncLocalStorage<string>();

export class BackgroundForks {
  private readonly pending = new Map<string, Set<Pending>>();
  private failures = 0;
  private closed = false;
  private readonly o: Required<Omit<BackgroundForksOptions, 'onOutcome'>> &
    Pick<BackgroundForksOptions, 'onOutcome'>;

  constructor(options: BackgroundForksOptions = {}) {
    this.o = {
      maxPendingPerParent: options.maxPendingPerParent ?? 1,
      maxConsecutiveFailures: options.maxConsecutiveFailures ?? 3,
      cancelWaitMs: options.cancelWaitMs ?? 2000,
      ...(options.onOutcome ? { onOutcome: options.onOutcome } : {}),
    };
  }

  /** Whether new forks may start (not closed, not stopped by consecutive failures). */
  get enabled(): boolean {
    return !this.closed && this.failures < this.o.maxConsecutiveFailures;
  }

  /**
   * Starts a fork (see {@link ForkTask}): its result is applied only if its source is still current.
   * Throws ForkRefusedError when the fork may not start.
   */
  start<T>(task: ForkTask<T>): Promise<ForkOutcome> {
    const { parent, run, isCurrent, apply } = task;
    if (insideFork.getStore() !== undefined) throw new ForkRefusedError('a fork cannot start a fork');
    if (this.closed) throw new ForkRefusedError('the fork runner is closed');
    if (this.failures >= this.o.maxConsecutiveFailures) {
      throw new ForkRefusedError(`forking stopped after ${this.failures} consecutive failures`);
    }
    const set = this.pending.get(parent) ?? new Set();
    if (set.size >= this.o.maxPendingPerParent)
      throw new ForkRefusedError(`${parent} already has ${set.size} pending fork(s)`);
    const controller = new AbortController();
    const entry: Pending = { parent, controller, done: Promise.resolve(CANCELLED) };
    entry.done = insideFork
      .run(parent, async (): Promise<ForkOutcome> => {
        try {
          const value = await run(controller.signal);
          if (controller.signal.aborted) return CANCELLED;
          this.failures = 0;
          if (!isCurrent())
            return {
              ok: false,
              status: 'discarded',
              reason: 'the source changed while the fork ran: the result is stale',
            };
          await apply(value);
          return { ok: true, status: 'applied', value };
        } catch (err) {
          if (controller.signal.aborted) return CANCELLED;
          this.failures++;
          return { ok: false, status: 'failed', reason: err instanceof Error ? err.message : String(err) };
        }
      })
      .then((outcome) => {
        set.delete(entry);
        if (!set.size) this.pending.delete(parent);
        this.o.onOutcome?.(parent, outcome);
        return outcome;
      });
    set.add(entry);
    this.pending.set(parent, set);
    return entry.done;
  }

  /** Counts the forks pending for a parent. */
  pendingFor(parent: string): number {
    return this.pending.get(parent)?.size ?? 0;
  }

  /** A live parent turn cancels its pending forks, waiting at most `cancelWaitMs` for them to stop. */
  async cancel(parent: string): Promise<void> {
    const set = this.pending.get(parent);
    if (!set) return;
    for (const p of set) p.controller.abort();
    await Promise.race([Promise.allSettled([...set].map((p) => p.done)), sleep(this.o.cancelWaitMs)]);
  }

  /** Cancels every fork and waits for them (bounded) — call before closing the shared client. */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.all([...this.pending.keys()].map((p) => this.cancel(p)));
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms).unref());
}
