// Which conversation a request continues, forks from, or starts: decided by the transcript keys at its
// message ends (prefix/message-ends) and the replies it carries (reply-keys), narrowed by its session label.
// Pure: the store is passed in and out. It never reads a body, a clock or a header; there is no default
// bucket (strangers share nothing), and two different labels are never one line or a fork of each other.

import { drainSteps, STEP_ITEMS } from '../core/steps.js';
import type { MessageEnd } from '../prefix/message-ends.js';
import type { ConversationStore, Relation, RequestNode } from './conversation-store.js';
import type { ReplyAnchor } from './reply-keys.js';

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
  /** The key of its last message ({@link lastMessageKey}): the next request's reply follows it. */
  last?: string;
  /**
   * Its messages after its end `after` that a reply follows ({@link replyAnchors}), latest first; asked
   * only when its transcript does not reach its latest reply (a resume re-serialized older blocks).
   */
  anchors?: (after: number) => readonly ReplyAnchor[];
}

/** Another label's request whose cached prefix a request's history shares (it started warm from it). */
export interface WarmSource {
  request: string;
  label: string;
  /** Estimated tokens of the shared history (to the shared message end). */
  tokens: number;
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
  /** A conversation's first request that shares its history with another label's request: which one. */
  warm?: WarmSource;
}

const newId = (requestId: string) => `c-${requestId}`;

interface Candidate {
  node: RequestNode;
  /** The request's end where it shares the parent's history (-1: none as sent). */
  at: number;
  agreed: boolean;
  full: boolean;
  /** Found by the reply it carries: it extends the parent's whole history, re-serialized. */
  carried?: boolean;
}

/** What the search found: the parent, and another label's request the history is shared with. */
interface Found {
  parent: Candidate | undefined;
  warm: WarmSource | undefined;
}

/** Two different labels: never one line, and never a fork of the other (DESIGN.md). */
const otherLabel = (node: RequestNode, req: ConversationRequest): boolean =>
  node.label !== undefined && req.label !== undefined && node.label !== req.label;

/**
 * Finds the parent: the deepest shared history under the request's label (or where either has none).
 * First the latest request whose whole history this one extends (a message end that was some request's
 * last), then a deeper partial match (an edit or rewind of a line), which must share more than the
 * opening input, then a deeper request whose reply this one carries (its older blocks re-serialized, as a
 * resume on another model does). Another label's request whose cached prefix agrees at a shared end is
 * only noted: the request started warm from it.
 */
function* findParentSteps(store: ConversationStore, req: ConversationRequest): Generator<void, Found> {
  const chained = chainedParent(store, req);
  if (chained) return { parent: chained, warm: undefined };
  const ends = req.ends;
  let warm: WarmSource | undefined;
  const noteWarm = (node: RequestNode, end: MessageEnd) => {
    if (warm || node.label === undefined) return;
    warm = { request: node.id, label: node.label, tokens: end.tokens };
  };
  let full: Candidate | undefined;
  let step = 0;
  for (let i = ends.length - 1; i >= 0 && !full; i--) {
    if (++step === STEP_ITEMS) {
      step = 0;
      yield;
    }
    const end = ends[i] as MessageEnd;
    let best: RequestNode | undefined;
    let other: RequestNode | undefined;
    for (const id of store.endingAt(end.transcript)) {
      const node = store.request(id);
      if (!node?.final) continue;
      const agreed = end.cacheKey === node.final.cacheKey;
      // A request that is only an opening shared with another sent under other tools, system or parameters
      // is a stranger's (one task set under two prompts) unless a label says it is the same: sharing only
      // the opening makes no conversation (as below). One that goes on past it (a reply it carries) does.
      if (
        end.opening &&
        i === ends.length - 1 &&
        node.head !== req.head &&
        (node.label === undefined || node.label !== req.label)
      )
        continue;
      if (otherLabel(node, req)) {
        // The earliest: the one whose request wrote what the others (and this one) read.
        if (agreed && (!other || node.time < other.time)) other = node;
        continue;
      }
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
    if (other) noteWarm(other, end);
    if (best?.final) full = { node: best, at: i, agreed: end.cacheKey === best.final.cacheKey, full: true };
  }
  // The latest request ending where this one's history does sent other tools, system or parameters: this
  // one's own line may end earlier in it (the same messages under two prompts, replies and all).
  if (full && full.node.head !== req.head) full = (yield* ownLineEarlier(store, req, full)) ?? full;
  let found = full;
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
    if (otherLabel(node, req)) {
      if (agreed) noteWarm(node, end);
      continue;
    }
    const sameLabel = node.label === req.label;
    if ((sameLabel && (req.label !== undefined || agreed)) || (agreed && j >= 1)) {
      found = { node, at: j, agreed, full: false };
      break;
    }
  }
  // The transcript reached no line's latest request: a deeper request whose reply it carries is the line.
  if (!found || (found.full && !isTip(store, found.node))) {
    const carried = yield* carriedReply(store, req, found);
    if (carried) return { parent: carried, warm: undefined };
  }
  if (found) return { parent: found, warm: undefined };
  const head = headMatch(store, req);
  return { parent: head, warm: head ? undefined : warm };
}

/**
 * A request of this one's own line where the latest request ending at end `at` of its history sent other
 * tools, system or parameters: under the same label, with the same ones (head), still its line's tip, at
 * that end (two prompts that sent the same history so far) or earlier in the history, and then started
 * after the other line did (a line that predates it was left for it: a first request retried on another
 * model, whose retry the user carried on). A request a later one of its line continued is not a tip (a
 * model switched back continues the switch, not the start).
 */
function* ownLineEarlier(
  store: ConversationStore,
  req: ConversationRequest,
  other: Candidate,
): Generator<void, Candidate | undefined> {
  const since = store.conversation(other.node.conversation)?.started ?? other.node.time;
  let step = 0;
  for (let i = other.at; i >= 0; i--) {
    if (++step === STEP_ITEMS) {
      step = 0;
      yield;
    }
    const end = req.ends[i] as MessageEnd;
    let best: RequestNode | undefined;
    for (const id of store.endingAt(end.transcript)) {
      const node = store.request(id);
      if (!node?.final || node.head !== req.head || node.label !== req.label || !isTip(store, node)) continue;
      if (i < other.at && node.time <= since) continue;
      if (!best || node.time >= best.time) best = node;
    }
    if (best?.final) return { node: best, at: i, agreed: end.cacheKey === best.final.cacheKey, full: true };
  }
  return undefined;
}

function isTip(store: ConversationStore, node: RequestNode): boolean {
  const conv = store.conversation(node.conversation);
  return !conv || conv.tip === node.id;
}

/**
 * The latest request whose reply this one carries after its end `after`: its last message, then a reply,
 * stand in this request's history (whatever a resume re-serialized before them: thinking left out of older
 * replies, say). Under the same label, or, where either has none, with the same first message.
 */
function* carriedReply(
  store: ConversationStore,
  req: ConversationRequest,
  found: Candidate | undefined,
): Generator<void, Candidate | undefined> {
  const anchors = req.anchors?.(found?.at ?? -1) ?? [];
  const opening = req.ends[0]?.transcript;
  let step = 0;
  for (const a of anchors) {
    if (++step === STEP_ITEMS) {
      step = 0;
      yield;
    }
    let best: RequestNode | undefined;
    for (const id of store.endingAt(a.key)) {
      const node = store.request(id);
      if (!node?.final || otherLabel(node, req)) continue;
      if (!(node.label !== undefined && node.label === req.label) && node.opening !== opening) continue;
      if (!best || node.time >= best.time) best = node;
    }
    const end = req.ends[a.end];
    if (!best?.final || !end) continue;
    // What it shares as sent is what the transcript found in the same line; the anchor's key says whether
    // tools, system and parameters stayed where nothing was found.
    if (found && found.node.conversation === best.conversation)
      return { node: best, at: found.at, agreed: found.agreed, full: true, carried: true };
    return { node: best, at: -1, agreed: end.cacheKey === best.final.cacheKey, full: true, carried: true };
  }
  return undefined;
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
  const search = yield* findParentSteps(store, req);
  const found = search.parent;
  if (!found) return alone(store, req, search.warm);
  const { node: parent, at, agreed } = found;
  const end = req.ends[at];
  // A carried reply shares the parent's history only as re-serialized: every end is indexed anew.
  const shared = {
    messages: end ? end.message + 1 : 0,
    tokens: end?.tokens ?? 0,
    full: found.full && !found.carried,
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

/** A request that shares no history under its label: a conversation of its own (warm, if another's was). */
function alone(store: ConversationStore, req: ConversationRequest, warm: WarmSource | undefined): Resolution {
  return {
    conversation: newId(req.id),
    relation: req.label !== undefined && store.labelSeen(req.label) ? 'sibling' : 'new',
    agreed: false,
    duplicate: false,
    turn: 1,
    reclassified: [],
    ...(warm ? { warm } : {}),
  };
}

/**
 * A request that continues a fork F whose sibling M (the provisional main line) went nowhere: the line
 * that goes on is the main one (forks are what the main line never carries on), so F becomes the main
 * line and M the fork. Only under one label, and not where M kept the parent's cached prefix and F did
 * not: a background agent that branched with wider tools runs its own turns while the main line waits,
 * and stays the fork.
 */
function swapIfMainReturns(store: ConversationStore, f: RequestNode, out: Resolution): void {
  if (f.relation !== 'fork' || f.children > 0 || !f.parent) return;
  const pp = store.request(f.parent);
  if (!pp?.next || pp.next === f.id) return;
  const m = store.request(pp.next);
  const main = store.conversation(pp.conversation);
  if (!m || m.children > 0 || m.label !== f.label || main?.tip !== m.id) return;
  if (m.agreed && !f.agreed) return;
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
  const opening = req.ends[0]?.transcript;
  if (opening !== undefined) node.opening = opening;
  if (last) {
    node.final = {
      transcript: last.transcript,
      cacheKey: last.cacheKey,
      messages: last.message + 1,
      tokens: last.tokens,
    };
    if (req.last !== undefined) node.final.last = req.last;
  }
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
  // Found by the requests that carry its reply.
  if (last && req.last !== undefined) store.addEnding(req.last, req.id);
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
