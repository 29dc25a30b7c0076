// What the conversation model remembers: requests (as the ends of their messages), conversations and the
// indexes from transcript keys to requests. Behind an interface so a fleet can keep it elsewhere; pure data.

import { LruMap } from '../core/lru-map.js';

/** How a request relates to the conversations seen before it. */
export type Relation = 'continues' | 'fork' | 'sibling' | 'new';

/** One request the model has seen (and committed: the upstream answered it). */
export interface RequestNode {
  id: string;
  conversation: string;
  label?: string;
  time: number;
  model?: string;
  /**
   * The end of its last message: transcript and cache key there, how many messages, estimated tokens, and
   * the key of that message (reply-keys), which a later request carries with the reply after it.
   */
  final?: { transcript: string; cacheKey: string; messages: number; tokens: number; last?: string };
  /** The transcript key at its first message end: a carried reply without a label must open the same way. */
  opening?: string;
  /** The request it was compared with (and took fix state from). */
  parent?: string;
  relation: Relation;
  /** Its cache key agreed with the parent's at the parent's last message (same tools, system, parameters). */
  agreed: boolean;
  /** The child that continues this request's line, if one has come. */
  next?: string;
  /** How many committed requests name this one as parent. */
  children: number;
  /** 1-based position in its conversation. */
  turn: number;
  /** The cache key where its messages begin (tools, system and parameters). */
  head: string;
  /** The id of the provider's response to it (Responses: what `previous_response_id` names). */
  response?: string;
}

/** One conversation: a line of requests, its label and where it came from. */
export interface ConversationInfo {
  id: string;
  label?: string;
  /** The latest request of the line. */
  tip: string;
  relation: Relation;
  /** For forks: the conversation and request it branched from. */
  forkOf?: { conversation: string; request: string };
  requests: number;
  started: number;
}

/** A request that passed through a message end, with its cache key at that end. */
export interface PassingEntry {
  request: string;
  cacheKey: string;
}

/** Storage for the model. Every method is synchronous; a remote store loads what a request needs first. */
export interface ConversationStore {
  request(id: string): RequestNode | undefined;
  putRequest(node: RequestNode): void;
  conversation(id: string): ConversationInfo | undefined;
  putConversation(info: ConversationInfo): void;
  /**
   * Requests whose last message ends at this transcript key, oldest first; also asked with a message's
   * reply key (`reply:…`): the requests whose last message it is.
   */
  endingAt(transcript: string): readonly string[];
  addEnding(transcript: string, request: string): void;
  /** The latest request with a message (not its last) ending at this transcript key, and its cache key there. */
  passingThrough(transcript: string): PassingEntry | undefined;
  addPassing(transcript: string, entry: PassingEntry): void;
  /** Whether any conversation has had this label, and the label's latest request. */
  labelSeen(label: string): boolean;
  latestOfLabel(label: string): string | undefined;
  addLabel(label: string, request: string): void;
  /**
   * The request a provider response id answered, and recording it once the response names its id
   * (optional: a store without it links chained Responses requests by their history alone).
   */
  requestOfResponse?(responseId: string): string | undefined;
  addResponse?(responseId: string, request: string): void;
}

/** Options for {@link MemoryConversationStore}. */
/**
 * The bounds of a store that follows live traffic, from the conversations it keeps: each holds its tip, a few
 * earlier requests (forks and rewinds find them) and the transcript keys of its messages.
 */
export function liveStoreBounds(
  maxConversations: number,
): Required<Pick<MemoryConversationStoreOptions, 'maxConversations' | 'maxRequests' | 'maxKeys'>> {
  return { maxConversations, maxRequests: maxConversations * 4, maxKeys: maxConversations * 16 };
}

export interface MemoryConversationStoreOptions {
  /** The most requests remembered (least recently used go first). Default 200,000. */
  maxRequests?: number;
  /** The most transcript keys indexed. Default 1,000,000. */
  maxKeys?: number;
  /** The most conversations (and labels) remembered. Default `maxRequests`. */
  maxConversations?: number;
  /**
   * Told of each request the store forgets (pushed out, expired, or gone with its conversation), so what
   * is kept beside it by request id (fix state) goes too.
   */
  onForget?: (request: string) => void;
  /**
   * The most requests kept of one conversation (default: no bound but `maxRequests`): past it the oldest
   * that is not the tip goes, and the message ends it indexed are found through the request that continued
   * it (the same content up to them, the same cache key there). What is kept then follows the
   * conversations, not the traffic.
   */
  maxRequestsPerConversation?: number;
}

/** What survives a restart: each recent conversation's latest request, enough to continue it. */
export interface ConversationSnapshot {
  version: 1;
  conversations: ConversationInfo[];
  requests: RequestNode[];
}

/**
 * The in-memory store, bounded: memory stays flat however many conversations pass. A request goes with
 * its conversation, and its index keys and response id go with it: nothing is left of a forgotten
 * conversation to fill the indexes' own caps (they are only the backstop).
 */
export class MemoryConversationStore implements ConversationStore {
  private readonly requests: LruMap<RequestNode>;
  private readonly conversations: LruMap<ConversationInfo>;
  private readonly endings: LruMap<string[]>;
  private readonly passing: LruMap<PassingEntry>;
  private readonly labels: LruMap<string>;
  private readonly responses: LruMap<string>;
  /**
   * What ties a request to the rest, kept lean (two map entries per request, one list per conversation):
   * the conversation each request is listed under, each conversation's requests, and the passing keys a
   * request wrote (its ending key is its `final.transcript`).
   */
  private readonly listedUnder = new Map<string, string>();
  private readonly members = new Map<string, string[]>();
  private readonly passingKeys = new Map<string, string[]>();
  private readonly onForget: ((request: string) => void) | undefined;
  private readonly perConversation: number;
  /** The expiry given to what is written from now on (see {@link stamp}); none: kept until pushed out. */
  private expiresAt: number | undefined;

  constructor(options: MemoryConversationStoreOptions = {}) {
    const maxRequests = options.maxRequests ?? 200_000;
    const maxKeys = options.maxKeys ?? 1_000_000;
    const maxConversations = options.maxConversations ?? maxRequests;
    this.onForget = options.onForget;
    this.perConversation = Math.max(2, options.maxRequestsPerConversation ?? Number.POSITIVE_INFINITY);
    this.requests = new LruMap(maxRequests, (id, node) => this.forgetRequest(id, node));
    this.conversations = new LruMap(maxConversations, (id) => this.forgetConversation(id));
    this.endings = new LruMap(maxKeys);
    this.passing = new LruMap(maxKeys);
    this.labels = new LruMap(maxConversations);
    this.responses = new LruMap(maxRequests);
  }

  /** A conversation went: so do its requests. */
  private forgetConversation(id: string): void {
    const held = this.members.get(id);
    if (!held) return;
    this.members.delete(id);
    for (const r of held) {
      if (this.listedUnder.get(r) !== id) continue;
      const node = this.requests.peek(r);
      this.requests.delete(r);
      this.forgetRequest(r, node);
    }
  }

  /** A request went: its index keys (those still naming it), its response id and its listing go. */
  private forgetRequest(id: string, node: RequestNode | undefined): void {
    const conversation = this.listedUnder.get(id);
    if (conversation !== undefined) {
      this.listedUnder.delete(id);
      this.unlist(conversation, id);
    }
    for (const ending of [node?.final?.transcript, node?.final?.last]) {
      if (ending === undefined) continue;
      const list = this.endings.peek(ending);
      const at = list ? list.indexOf(id) : -1;
      // In place: the key keeps its age and expiry (lists are only read synchronously).
      if (list && at >= 0) list.splice(at, 1);
      if (list?.length === 0) this.endings.delete(ending);
    }
    const passing = this.passingKeys.get(id);
    if (passing) {
      this.passingKeys.delete(id);
      for (const key of passing) if (this.passing.peek(key)?.request === id) this.passing.delete(key);
    }
    const response = node?.response;
    if (response !== undefined && this.responses.peek(response) === id) this.responses.delete(response);
    this.onForget?.(id);
  }

  private unlist(conversation: string, id: string): void {
    const held = this.members.get(conversation);
    if (!held) return;
    // Requests go oldest first: the one leaving is nearly always at the front.
    const at = held.indexOf(id);
    if (at >= 0) held.splice(at, 1);
    if (held.length === 0) this.members.delete(conversation);
  }

  /** What is written until the next stamp expires at `expiresAt` (a request's time plus its cache's TTL). */
  stamp(expiresAt: number | undefined): void {
    this.expiresAt = expiresAt;
  }

  /** Forgets what expired by `now` (oldest first, a bounded amount of work per call). */
  prune(now: number): void {
    for (const m of [
      this.requests,
      this.conversations,
      this.endings,
      this.passing,
      this.labels,
      this.responses,
    ])
      m.prune(now);
  }

  /** How much is held, for bounds checks and health. */
  sizes(): {
    requests: number;
    conversations: number;
    keys: number;
    labels: number;
    responses: number;
  } {
    return {
      requests: this.requests.size,
      conversations: this.conversations.size,
      keys: this.endings.size + this.passing.size,
      labels: this.labels.size,
      responses: this.responses.size,
    };
  }

  /** The latest `limit` conversations and their tips (for a state file). */
  snapshot(limit = 10_000): ConversationSnapshot {
    const conversations = [...this.conversations.values()].slice(-limit);
    const requests: RequestNode[] = [];
    for (const c of conversations) {
      const tip = this.requests.get(c.tip);
      if (tip) requests.push(tip);
    }
    return { version: 1, conversations, requests };
  }

  /** Loads a snapshot: every tip is findable again by its last message end and its label. */
  restore(snap: ConversationSnapshot): void {
    for (const c of snap.conversations) this.putConversation(c);
    for (const r of snap.requests) {
      this.putRequest(r);
      if (r.final) this.addEnding(r.final.transcript, r.id);
      if (r.final?.last !== undefined) this.addEnding(r.final.last, r.id);
      if (r.label !== undefined) this.addLabel(r.label, r.id);
      if (r.response !== undefined) this.responses.set(r.response, r.id);
    }
  }

  request(id: string): RequestNode | undefined {
    return this.requests.get(id);
  }
  /** Whether the request is still held (a later one can be related to it), without making it the youngest. */
  holds(id: string): boolean {
    return this.requests.peek(id) !== undefined;
  }
  putRequest(node: RequestNode): void {
    const listed = this.listedUnder.get(node.id);
    if (listed !== node.conversation) {
      // New, or moved to another conversation (a provisional main line re-named a fork).
      if (listed !== undefined) this.unlist(listed, node.id);
      this.listedUnder.set(node.id, node.conversation);
      const held = this.members.get(node.conversation);
      if (held) held.push(node.id);
      else this.members.set(node.conversation, [node.id]);
      if (held && held.length > this.perConversation) this.trim(node, held);
    }
    this.requests.set(node.id, node, this.expiresAt);
  }

  /**
   * A conversation holds more requests than it may: its oldest that is neither its tip, `added` nor
   * `added`'s parent goes. The message ends it indexed are handed to the request that continued it when
   * that one agreed with it (same tools, system and parameters: the same cache key at each of them).
   */
  private trim(added: RequestNode, held: string[]): void {
    const tip = this.conversations.peek(added.conversation)?.tip;
    const old = held.find((r) => r !== tip && r !== added.id && r !== added.parent);
    if (old === undefined) return;
    const node = this.requests.peek(old);
    const next = node?.next !== undefined ? this.requests.peek(node.next) : undefined;
    const keys = this.passingKeys.get(old);
    if (next && next.parent === old && next.agreed && keys && this.listedUnder.has(next.id)) {
      this.passingKeys.delete(old);
      const mine = this.passingKeys.get(next.id) ?? [];
      for (const key of keys) {
        const entry = this.passing.peek(key);
        if (entry?.request !== old) continue;
        entry.request = next.id;
        mine.push(key);
      }
      this.passingKeys.set(next.id, mine);
    }
    this.requests.delete(old);
    this.forgetRequest(old, node);
  }
  conversation(id: string): ConversationInfo | undefined {
    return this.conversations.get(id);
  }
  putConversation(info: ConversationInfo): void {
    this.conversations.set(info.id, info, this.expiresAt);
  }
  endingAt(transcript: string): readonly string[] {
    return this.endings.get(transcript) ?? [];
  }
  addEnding(transcript: string, request: string): void {
    const before = this.endings.get(transcript);
    // Lists of their exact length: a spread into a literal leaves room for 16 more ids in each, and a report
    // holds one per request.
    let list: string[];
    if (!before || before.length === 0) list = [request];
    else {
      const kept = before.filter((r) => r !== request);
      kept.push(request);
      // A handful is enough to find the right one (same label, latest); retries must not grow it forever.
      list = kept.slice(kept.length > 8 ? -8 : 0);
    }
    this.endings.set(transcript, list, this.expiresAt);
  }
  passingThrough(transcript: string): PassingEntry | undefined {
    return this.passing.get(transcript);
  }
  addPassing(transcript: string, entry: PassingEntry): void {
    this.passing.set(transcript, entry, this.expiresAt);
    // Noted only for a request still held (its keys go with it).
    if (!this.listedUnder.has(entry.request)) return;
    const keys = this.passingKeys.get(entry.request);
    if (!keys) this.passingKeys.set(entry.request, [transcript]);
    else if (keys[keys.length - 1] !== transcript) {
      // Short lists of their exact length (concat; a push grows an array by 16 slots at least, and most
      // requests pass one or two new ends).
      if (keys.length < 16) this.passingKeys.set(entry.request, keys.concat(transcript));
      else keys.push(transcript);
    }
  }
  labelSeen(label: string): boolean {
    return this.labels.get(label) !== undefined;
  }
  latestOfLabel(label: string): string | undefined {
    return this.labels.get(label);
  }
  addLabel(label: string, request: string): void {
    this.labels.set(label, request, this.expiresAt);
  }
  requestOfResponse(responseId: string): string | undefined {
    return this.responses.get(responseId);
  }
  addResponse(responseId: string, request: string): void {
    const node = this.requests.get(request);
    // A request already forgotten cannot be a parent: its response id would only take room.
    if (!node) return;
    this.responses.set(responseId, request, this.expiresAt);
    if (node.response !== responseId) {
      node.response = responseId;
      this.putRequest(node);
    }
  }
}
