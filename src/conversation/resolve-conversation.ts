// Which conversation a request continues, forks from, or starts: decided by the transcript keys at its
// message ends (prefix/message-ends), narrowed by its session label. Pure: the store is passed in and out.
// It never reads a body, a clock or a header, and there is no default bucket: strangers share nothing.

import type { MessageEnd } from '../prefix/message-ends.js';
import { drainSteps, STEP_ITEMS } from '../wire/json-scan.js';
import type { ConversationStore, Relation, RequestNode } from './conversation-store.js';

/** What the resolver needs of a request. */
export interface ConversationRequest {
  id: string;
  /** When it started (ms); a parameter, never read from a clock. */
  time: number;
  label?: string;
  model?: string;
  /** Its message ends, from {@link messageEnds} on the request the client sent. */
  ends: readonly MessageEnd[];
  /** The cache key where its messages begin (tools, system and parameters folded): `levels.messages.foldHash`. */
  head: string;
  /** A Responses request's `previous_response_id`: it continues the request that got that response. */
  previous?: string;
}

/** A request whose relation an arrival changed (a provisional main line that turned out to be a fork). */
export interface Reclassified {
  request: string;
  relation: Relation;
  conversation: string;
}

/** Where a request belongs. */
export interface Resolution {
  conversation: string;
  relation: Relation;
  /** The request it extends or branches from: compare with it, take fix state from it. */
  parent?: string;
  /**
   * What it shares with the parent's history: messages and estimated tokens up to the shared end, and
   * whether that is the parent's whole history (`full`) or only part of it (an edit, a rewind).
   */
  shared?: { messages: number; tokens: number; full: boolean; ends: number };
  /** Its cache key at the shared end equals the parent's there (same tools, system and parameters). */
  agreed: boolean;
  /** The same history as the parent, resent (a retry or a parallel duplicate). */
  duplicate: boolean;
  turn: number;
  reclassified: Reclassified[];
}

const newId = (requestId: string) => `c-${requestId}`;

interface Candidate {
  node: RequestNode;
  at: number;
  agreed: boolean;
  full: boolean;
}

/**
 * Finds the deepest shared history: first the latest request whose whole history this one extends (a
 * message end that was some request's last), then a deeper partial match (an edit or rewind of a line),
 * which must share more than the opening input. A match under another label counts only when the cached
 * prefix agrees or a real history is shared.
 */
function* findParentSteps(
  store: ConversationStore,
  req: ConversationRequest,
): Generator<void, Candidate | undefined> {
  const chained = chainedParent(store, req);
  if (chained) return chained;
  const ends = req.ends;
  let full: Candidate | undefined;
  let step = 0;
  for (let i = ends.length - 1; i >= 0 && !full; i--) {
    if (++step === STEP_ITEMS) {
      step = 0;
      yield;
    }
    const end = ends[i] as MessageEnd;
    let best: RequestNode | undefined;
    for (const id of store.endingAt(end.transcript)) {
      const node = store.request(id);
      if (!node?.final) continue;
      const agreed = end.cacheKey === node.final.cacheKey;
      const sameLabel = node.label === req.label;
      if (!sameLabel && !agreed && node.final.messages < 2) continue;
      // Same label first, then the latest (a later one of equal rank wins a tie).
      if (!best) best = node;
      else {
        const rank = sameLabel ? 0 : 1;
        const bestRank = best.label === req.label ? 0 : 1;
        if (rank < bestRank || (rank === bestRank && node.time >= best.time)) best = node;
      }
    }
    if (best?.final) full = { node: best, at: i, agreed: end.cacheKey === best.final.cacheKey, full: true };
  }
  for (let j = ends.length - 1; j > (full?.at ?? -1); j--) {
    if (++step === STEP_ITEMS) {
      step = 0;
      yield;
    }
    const end = ends[j] as MessageEnd;
    // Sharing only the opening (user input before any reply) makes no conversation: strangers send the
    // same context block or template before their own task.
    if (end.opening) break;
    const entry = store.passingThrough(end.transcript);
    if (!entry) continue;
    const node = latestInLine(store, entry.request, end.message);
    if (!node) continue;
    // A sibling of `node` (both extend the same request, they differ in the newest turn) shares node's
    // reply with it; that is the full match's business, not an edit of node.
    if (full && node.parent === full.node.id) break;
    const agreed = entry.cacheKey === end.cacheKey;
    const sameLabel = node.label === req.label;
    if ((sameLabel && (req.label !== undefined || agreed)) || (agreed && j >= 1))
      return { node, at: j, agreed, full: false };
  }
  if (full) return full;
  return headMatch(store, req);
}

/**
 * A Responses request chained with `previous_response_id` on a response the store knows: that response's
 * request is the parent, at its last message end when the request's history passes through it (the chain
 * made whole), else with nothing shared that can be counted (its context was an opaque block).
 */
function chainedParent(store: ConversationStore, req: ConversationRequest): Candidate | undefined {
  if (req.previous === undefined) return undefined;
  const id = store.requestOfResponse?.(req.previous);
  const node = id !== undefined ? store.request(id) : undefined;
  if (!node) return undefined;
  const final = node.final;
  for (let i = req.ends.length - 1; final && i >= 0; i--) {
    const end = req.ends[i] as MessageEnd;
    if (end.transcript === final.transcript)
      return { node, at: i, agreed: end.cacheKey === final.cacheKey, full: true };
  }
  return { node, at: -1, agreed: false, full: false };
}

/**
 * No shared message end: the first message itself changed (a date reminder re-rendered into it). Under a
 * label, the label's latest request with the same tools and system and no longer a history is the line.
 */
function headMatch(store: ConversationStore, req: ConversationRequest): Candidate | undefined {
  if (req.label === undefined || req.ends.length < 2) return undefined;
  const latest = store.latestOfLabel(req.label);
  const node = latest ? store.request(latest) : undefined;
  if (!node?.final || node.head !== req.head || req.ends.length < node.final.messages) return undefined;
  return { node, at: -1, agreed: true, full: false };
}

/**
 * The request a passing entry stands for: the latest of its line when that one still has more messages
 * than the end (it grew past it), else the entry's own request.
 */
function latestInLine(store: ConversationStore, id: string, message: number): RequestNode | undefined {
  const node = store.request(id);
  if (!node) return undefined;
  const conv = store.conversation(node.conversation);
  const tip = conv && conv.tip !== id ? store.request(conv.tip) : undefined;
  return tip?.final && tip.final.messages > message + 1 ? tip : node;
}

/** Resolves a request against what the store holds. Reads only; {@link commitConversation} records it. */
export function resolveConversation(store: ConversationStore, req: ConversationRequest): Resolution {
  return drainSteps(resolveConversationSteps(store, req));
}

/**
 * {@link resolveConversation} in bounded steps: it yields every {@link STEP_ITEMS} message ends it looks
 * up. The same resolution, provided the store does not change between the steps (the tracker holds its
 * commits back meanwhile: conversation-tracker's `trackSteps`).
 */
export function* resolveConversationSteps(
  store: ConversationStore,
  req: ConversationRequest,
): Generator<void, Resolution> {
  const found = yield* findParentSteps(store, req);
  if (!found) return alone(store, req);
  const { node: parent, at, agreed } = found;
  const end = req.ends[at];
  const shared = {
    messages: end ? end.message + 1 : 0,
    tokens: end?.tokens ?? 0,
    full: found.full,
    ends: at + 1,
  };
  // Each result written out field by field (an object spread per result cost more: this runs twice per exchange).
  const fork = (): Resolution => ({
    parent: parent.id,
    shared,
    agreed,
    reclassified: [],
    conversation: newId(req.id),
    relation: 'fork',
    duplicate: false,
    turn: 1,
  });
  const continues = (duplicate: boolean): Resolution => ({
    parent: parent.id,
    shared,
    agreed,
    reclassified: [],
    conversation: parent.conversation,
    relation: 'continues',
    duplicate,
    turn: (store.conversation(parent.conversation)?.requests ?? parent.turn) + 1,
  });
  if (parent.label !== req.label) return fork();
  const conv = store.conversation(parent.conversation);
  const isTip = !conv || conv.tip === parent.id;
  if (!found.full) return isTip ? continues(false) : fork();
  const duplicate = at === req.ends.length - 1;
  if (isTip) {
    const out = continues(duplicate);
    swapIfMainReturns(store, parent, out);
    return out;
  }
  if (duplicate) return continues(true);
  // The parent already has a continuing child. If that child went nowhere and this request keeps the
  // parent's cached prefix (or neither does and this is the later one), this is the main line returning
  // and the child was a fork beside it.
  const child = parent.next ? store.request(parent.next) : undefined;
  if (child && child.children === 0 && conv?.tip === child.id && (agreed || !child.agreed)) {
    const out = continues(false);
    out.reclassified.push({ request: child.id, relation: 'fork', conversation: newId(child.id) });
    return out;
  }
  // The line went on past the parent for more than a turn and its tip passes through the same message
  // end: this request rewrites the line's history after that end (an old turn dropped, a rewind), so it
  // continues the line from its tip, as an edit. Should the old line come back, that arrival makes this
  // request the fork (the case above, from the tip).
  const tip = conv && child && child.children > 0 ? store.request(conv.tip) : undefined;
  const passing = tip && end ? store.passingThrough(end.transcript) : undefined;
  const passer = passing && end ? latestInLine(store, passing.request, end.message) : undefined;
  if (tip && end && passing && passer?.id === tip.id) {
    return {
      conversation: parent.conversation,
      relation: 'continues',
      parent: tip.id,
      shared: { ...shared, full: false },
      agreed: passing.cacheKey === end.cacheKey,
      duplicate: false,
      turn: (conv?.requests ?? tip.turn) + 1,
      reclassified: [],
    };
  }
  return fork();
}

/** A request that shares nothing the store holds: a conversation of its own. */
function alone(store: ConversationStore, req: ConversationRequest): Resolution {
  return {
    conversation: newId(req.id),
    relation: req.label !== undefined && store.labelSeen(req.label) ? 'sibling' : 'new',
    agreed: false,
    duplicate: false,
    turn: 1,
    reclassified: [],
  };
}

/**
 * A request that continues a fork F whose sibling M (the provisional main line) went nowhere: the line
 * that goes on is the main one, so F becomes the main line and M the fork. Only under one label.
 */
function swapIfMainReturns(store: ConversationStore, f: RequestNode, out: Resolution): void {
  if (f.relation !== 'fork' || f.children > 0 || !f.parent || !f.agreed) return;
  const pp = store.request(f.parent);
  if (!pp?.next || pp.next === f.id) return;
  const m = store.request(pp.next);
  const main = store.conversation(pp.conversation);
  if (!m || m.children > 0 || m.label !== f.label || main?.tip !== m.id) return;
  out.conversation = pp.conversation;
  out.turn = (main?.requests ?? pp.turn) + 1;
  out.reclassified.push(
    { request: f.id, relation: 'continues', conversation: pp.conversation },
    { request: m.id, relation: 'fork', conversation: newId(m.id) },
  );
}

/** Records a resolved request (once the upstream accepted it): the node, its line, the indexes. */
export function commitConversation(
  store: ConversationStore,
  req: ConversationRequest,
  res: Resolution,
): RequestNode {
  return drainSteps(commitConversationSteps(store, req, res));
}

/**
 * {@link commitConversation} in bounded steps, the same writes in the same order. Everything but the
 * passing index is written before the first yield: the node, its parent's counts, its conversation's tip,
 * its label and its ending key. The passing keys (one per message end it adds, 100,000 for a new
 * 100,000-message conversation) follow {@link STEP_ITEMS} at a time, oldest message first. A resolution
 * that runs between two steps sees the new request as its line's tip (a request that extends it finds it
 * by its ending key) and the passing keys of its first messages only: an edit deeper in its history than
 * those is found through the older requests of the line that passed there, or not at all, until the
 * commit is done.
 */
export function* commitConversationSteps(
  store: ConversationStore,
  req: ConversationRequest,
  res: Resolution,
): Generator<void, RequestNode> {
  for (const r of res.reclassified) applyReclassification(store, r);
  const last = req.ends[req.ends.length - 1];
  const node: RequestNode = {
    id: req.id,
    conversation: res.conversation,
    time: req.time,
    relation: res.relation,
    agreed: res.agreed,
    children: 0,
    turn: res.turn,
    head: req.head,
  };
  if (req.label !== undefined) node.label = req.label;
  if (req.model !== undefined) node.model = req.model;
  if (res.parent) node.parent = res.parent;
  if (last)
    node.final = {
      transcript: last.transcript,
      cacheKey: last.cacheKey,
      messages: last.message + 1,
      tokens: last.tokens,
    };
  store.putRequest(node);
  const parent = res.parent ? store.request(res.parent) : undefined;
  if (parent) {
    parent.children++;
    if (res.relation === 'continues' && !res.duplicate && parent.conversation === res.conversation)
      parent.next = req.id;
    store.putRequest(parent);
  }
  const conv = store.conversation(res.conversation);
  if (conv) {
    conv.requests++;
    // A duplicate of the tip (a retry, a parallel twin) becomes the tip: the next turn extends either.
    if (!res.duplicate || conv.tip === res.parent) conv.tip = req.id;
    store.putConversation(conv);
  } else {
    store.putConversation({
      id: res.conversation,
      ...(req.label !== undefined ? { label: req.label } : {}),
      tip: req.id,
      relation: res.relation,
      ...(res.relation === 'fork' && parent
        ? { forkOf: { conversation: parent.conversation, request: parent.id } }
        : {}),
      requests: 1,
      started: req.time,
    });
  }
  if (req.label !== undefined) store.addLabel(req.label, req.id);
  if (last) store.addEnding(last.transcript, req.id);
  // The ends before the parent's last are indexed already (by the parent's line): index only from there,
  // so a request that appends a turn costs O(the new turn). Lookups go on to the line's latest request.
  const from = res.shared?.full ? Math.max(0, res.shared.ends - 1) : 0;
  for (let i = from; i < req.ends.length - 1; i++) {
    if ((i - from) % STEP_ITEMS === STEP_ITEMS - 1) yield;
    const e = req.ends[i] as MessageEnd;
    store.addPassing(e.transcript, { request: req.id, cacheKey: e.cacheKey });
  }
  return node;
}

function applyReclassification(store: ConversationStore, r: Reclassified): void {
  const node = store.request(r.request);
  if (!node) return;
  const before = store.conversation(node.conversation);
  node.relation = r.relation;
  node.conversation = r.conversation;
  store.putRequest(node);
  const parent = node.parent ? store.request(node.parent) : undefined;
  if (r.relation === 'fork') {
    store.putConversation({
      id: r.conversation,
      ...(node.label !== undefined ? { label: node.label } : {}),
      tip: node.id,
      relation: 'fork',
      ...(parent ? { forkOf: { conversation: parent.conversation, request: parent.id } } : {}),
      requests: 1,
      started: node.time,
    });
    if (before && before.id !== r.conversation) {
      before.requests = Math.max(1, before.requests - 1);
      if (before.tip === node.id && parent) before.tip = parent.id;
      store.putConversation(before);
    }
    if (parent?.next === node.id) {
      delete parent.next;
      store.putRequest(parent);
    }
  } else {
    if (parent) {
      parent.next = node.id;
      store.putRequest(parent);
    }
    const main = store.conversation(r.conversation);
    if (main) {
      main.tip = node.id;
      main.requests++;
      store.putConversation(main);
    }
  }
}
