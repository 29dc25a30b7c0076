// The proxy's seat at the conversation model: resolves each client request once (labels from its headers
// and body, ends from its prefix) and commits it only when the upstream accepted it. Holds no other state.

import { longestCacheTtlMs } from '../cache/longest-ttl.js';
import type { CapturedConversation } from '../capture/capture-record.js';
import type { Prefix } from '../prefix/build-prefix.js';
import { messageEnds } from '../prefix/message-ends.js';
import { formatFromRoute } from '../wire/request-body.js';
import { type ConversationSnapshot, MemoryConversationStore } from './conversation-store.js';
import {
  type ConversationRequest,
  commitConversation,
  type Resolution,
  resolveConversation,
} from './resolve-conversation.js';
import { type HeaderLookup, type SessionLabel, sessionLabel } from './session-label.js';

/** One resolved request, waiting for its answer. */
export interface TrackedRequest {
  label: SessionLabel | undefined;
  request: ConversationRequest;
  resolution: Resolution;
  committed: boolean;
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
  const label = sessionLabel(headers, prefix.body.fields);
  const previous = prefix.format === 'openai-responses' ? prefix.body.fields.previous_response_id : undefined;
  const request: ConversationRequest = {
    id,
    time,
    ends: messageEnds(prefix),
    head: prefix.levels.messages.foldHash,
    ...(label ? { label: label.key } : {}),
    ...(prefix.model ? { model: prefix.model } : {}),
    ...(typeof previous === 'string' && previous ? { previous } : {}),
  };
  return { label, request };
}

export class ConversationTracker {
  constructor(readonly store: MemoryConversationStore = new MemoryConversationStore()) {}

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

  /** Records the id of the response a committed request got (what a chained request names). */
  answered(t: TrackedRequest, responseId: string): void {
    if (t.committed) this.store.addResponse(responseId, t.request.id);
  }

  /** Records the request as a turn if the upstream accepted it; returns whether it did. */
  commit(t: TrackedRequest, route: string, status: number | undefined): boolean {
    if (t.committed || !countsAsTurn(route, status)) return false;
    // What a turn writes matters as long as its provider's cache can still hold its prefix, no longer.
    const time = t.request.time;
    this.store.stamp(time + longestCacheTtlMs(formatFromRoute(route)));
    commitConversation(this.store, t.request, t.resolution);
    this.store.prune(time);
    t.committed = true;
    return true;
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
