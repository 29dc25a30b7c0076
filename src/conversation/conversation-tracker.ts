// The proxy's seat at the conversation model: resolves each client request once (labels from its headers
// and body, ends from its prefix) and commits it only when the upstream accepted it, commits in order, in
// bounded steps when asked. Holds no other state; never reads a clock (times are parameters).

import { longestCacheTtlMs } from '../cache/longest-ttl.js';
import { StepQueue } from '../core/step-queue.js';
import { drainSteps } from '../core/steps.js';
import type { Prefix } from '../prefix/build-prefix.js';
import { messageEndsSteps } from '../prefix/message-ends.js';
import { formatFromRoute } from '../wire/request-body.js';
import { type ConversationSnapshot, MemoryConversationStore } from './conversation-store.js';
import { lastMessageKey, lazyAnchors } from './reply-keys.js';
import {
  type ConversationRequest,
  commitConversationSteps,
  type Resolution,
  resolveConversation,
  resolveConversationSteps,
} from './resolve-conversation.js';
import { type HeaderLookup, type SessionLabel, sessionLabel } from './session-label.js';

/** Where the conversation model put the request when the proxy saw it (the client's own bytes). */
export interface CapturedConversation {
  id: string;
  relation: 'continues' | 'fork' | 'sibling' | 'new';
  parent?: string;
  turn: number;
}

/** One resolved request, waiting for its answer. */
export interface TrackedRequest {
  label: SessionLabel | undefined;
  request: ConversationRequest;
  resolution: Resolution;
  committed: boolean;
}

/** A request the upstream answered (or did not: no status), as the tracker and the state record it. */
export interface AnsweredRequest {
  id: string;
  prefix: Prefix;
  headers: HeaderLookup;
  /** When it started, in ms. */
  time: number;
  route: string;
  /** The upstream's status; undefined when none came. */
  status: number | undefined;
}

/** A count_tokens call or a refused request is a turn of no conversation. */
export function countsAsTurn(route: string, status: number | undefined): boolean {
  return !route.includes('count_tokens') && (status === undefined || status < 400);
}

/** What the resolver is asked about a request: its label (from headers and body) and its message ends. */
export function conversationRequest(
  id: string,
  prefix: Prefix,
  headers: HeaderLookup,
  time: number,
): { label: SessionLabel | undefined; request: ConversationRequest } {
  return drainSteps(conversationRequestSteps(id, prefix, headers, time));
}

/** {@link conversationRequest} in bounded steps (its message ends are read a few hundred blocks at a time). */
export function* conversationRequestSteps(
  id: string,
  prefix: Prefix,
  headers: HeaderLookup,
  time: number,
): Generator<void, { label: SessionLabel | undefined; request: ConversationRequest }> {
  const label = sessionLabel(headers, prefix.body.fields);
  const previous = prefix.format === 'openai-responses' ? prefix.body.fields.previous_response_id : undefined;
  const ends = yield* messageEndsSteps(prefix);
  const last = lastMessageKey(prefix, ends);
  const request: ConversationRequest = {
    id,
    time,
    ends,
    head: prefix.levels.messages.foldHash,
    anchors: lazyAnchors(prefix, ends),
    ...(last !== undefined ? { last } : {}),
    ...(label ? { label: label.key } : {}),
    ...(prefix.model ? { model: prefix.model } : {}),
    ...(typeof previous === 'string' && previous ? { previous } : {}),
  };
  return { label, request };
}

/**
 * Resolves and commits requests against one store. Commits apply in the order they start: a stepped
 * commit ({@link commitSteps}, {@link trackSteps}) holds the next one back until it is done, and the
 * one-step {@link commit} first finishes any that is half done. A {@link resolve} while a stepped commit
 * is half done sees what `commitConversationSteps` documents: the new request as its line's tip, the
 * passing keys of its first messages only.
 */
export class ConversationTracker {
  /** Stepped commits (and resolutions with their commit), one at a time, in order. */
  private readonly line = new StepQueue();

  constructor(readonly store: MemoryConversationStore = new MemoryConversationStore()) {}

  /** Whether work is in line: a resolve, a track or a stepped commit not yet done. */
  get committing(): boolean {
    return this.line.busy;
  }

  snapshot(): ConversationSnapshot {
    return this.store.snapshot();
  }

  restore(snap: ConversationSnapshot): void {
    this.store.restore(snap);
  }

  resolve(id: string, prefix: Prefix, headers: HeaderLookup, time: number): TrackedRequest {
    const { label, request } = conversationRequest(id, prefix, headers, time);
    return { label, request, resolution: resolveConversation(this.store, request), committed: false };
  }

  /**
   * {@link resolve} in bounded steps: its message ends, then its resolution, after every stepped job begun
   * before it and with no stepped commit applied in between (it waits for, and helps finish, any under way).
   */
  *resolveSteps(
    id: string,
    prefix: Prefix,
    headers: HeaderLookup,
    time: number,
  ): Generator<void, TrackedRequest> {
    const store = this.store;
    return yield* this.line.run(
      (function* (): Generator<void, TrackedRequest> {
        const { label, request } = yield* conversationRequestSteps(id, prefix, headers, time);
        const resolution = yield* resolveConversationSteps(store, request);
        return { label, request, resolution, committed: false };
      })(),
    );
  }

  /** Records the id of the response a committed request got (what a chained request names). */
  answered(t: TrackedRequest, responseId: string): void {
    if (t.committed) this.store.addResponse(responseId, t.request.id);
  }

  /** Records the request as a turn if the upstream accepted it; returns whether it did. */
  commit(t: TrackedRequest, route: string, status: number | undefined): boolean {
    return drainSteps(this.commitSteps(t, route, status));
  }

  /**
   * {@link commit} in bounded steps (the passing index a few hundred keys at a time), after any earlier
   * stepped commit is done. `t.committed` is set as it begins, so it is never committed twice.
   */
  *commitSteps(t: TrackedRequest, route: string, status: number | undefined): Generator<void, boolean> {
    if (t.committed || !countsAsTurn(route, status)) return false;
    t.committed = true;
    yield* this.line.run(this.writeSteps(t.request, t.resolution, route));
    return true;
  }

  /**
   * Resolves and commits a request no fix looked at (the recorder's): once every stepped job begun before
   * it is done, its message ends, its resolution and its commit, in bounded steps with no other stepped
   * commit in between (the resolution reads the store it then writes).
   */
  *trackSteps(answered: AnsweredRequest): Generator<void, TrackedRequest> {
    const { id, prefix, headers, time, route, status } = answered;
    const turn = countsAsTurn(route, status);
    const store = this.store;
    const write = (request: ConversationRequest, res: Resolution) => this.writeSteps(request, res, route);
    // All of it in the line (the message ends too, though they read no store): requests are resolved in
    // the order their steps began, whatever their sizes.
    return yield* this.line.run(
      (function* (): Generator<void, TrackedRequest> {
        const { label, request } = yield* conversationRequestSteps(id, prefix, headers, time);
        const resolution = yield* resolveConversationSteps(store, request);
        if (turn) yield* write(request, resolution);
        return { label, request, resolution, committed: turn };
      })(),
    );
  }

  /** The store's writes for a commit, stamped with its expiry before each piece (another write between two
   * pieces may stamp its own). */
  private *writeSteps(
    request: ConversationRequest,
    resolution: Resolution,
    route: string,
  ): Generator<void, void> {
    // What a turn writes matters as long as its provider's cache can still hold its prefix, no longer.
    const time = request.time;
    const expiresAt = time + longestCacheTtlMs(formatFromRoute(route));
    const steps = commitConversationSteps(this.store, request, resolution);
    for (;;) {
      this.store.stamp(expiresAt);
      if (steps.next().done) break;
      yield;
    }
    this.store.prune(time);
  }
}

/** The record's session and conversation fields for a tracked request. */
export function recordedConversation(t: TrackedRequest): {
  session: { key: string; source: string };
  conversation: CapturedConversation;
} {
  const r = t.resolution;
  return {
    session: t.label ?? { key: r.conversation, source: 'conversation' },
    conversation: {
      id: r.conversation,
      relation: r.relation,
      turn: r.turn,
      ...(r.parent ? { parent: r.parent } : {}),
    },
  };
}
