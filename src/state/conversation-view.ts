// A ConversationStore over data loaded from a remote store for one request: reads come from what was
// loaded, writes go to an overlay, and a read of anything never loaded is noted so the shell can fetch it.
// Pure data: it never does I/O; the resolver and commit run on it exactly as on the memory store.

import type {
  ConversationInfo,
  ConversationStore,
  PassingEntry,
  RequestNode,
} from '../conversation/conversation-store.js';

/** What a remote store returned. `null` (or an empty list) means "asked, and absent". */
export interface LoadedState {
  requests: Map<string, RequestNode | null>;
  conversations: Map<string, ConversationInfo | null>;
  /** Each conversation's version when it was read (0 when it does not exist). */
  versions: Map<string, number>;
  endings: Map<string, readonly string[]>;
  passing: Map<string, PassingEntry | null>;
  labels: Map<string, string | null>;
}

/** Keys a resolve or commit read that were never loaded. */
export interface MissingKeys {
  requests: Set<string>;
  conversations: Set<string>;
  endings: Set<string>;
  passing: Set<string>;
  labels: Set<string>;
}

/** What a commit on the view changes, in a form a compare-and-swap can apply. */
export interface ViewWrites {
  requests: RequestNode[];
  conversations: ConversationInfo[];
  /** Conversations whose documents or requests change, with the version each had when read. */
  checks: Array<[conversation: string, version: number]>;
  endings: Array<[transcript: string, request: string]>;
  passing: Array<[transcript: string, entry: PassingEntry]>;
  labels: Array<[label: string, request: string]>;
}

export function emptyLoadedState(): LoadedState {
  return {
    requests: new Map(),
    conversations: new Map(),
    versions: new Map(),
    endings: new Map(),
    passing: new Map(),
    labels: new Map(),
  };
}

export function emptyMissing(): MissingKeys {
  return {
    requests: new Set(),
    conversations: new Set(),
    endings: new Set(),
    passing: new Set(),
    labels: new Set(),
  };
}

export function missingCount(m: MissingKeys): number {
  return m.requests.size + m.conversations.size + m.endings.size + m.passing.size + m.labels.size;
}

/** Adds `more` into `into` (a later load of keys the first one lacked). */
export function mergeLoaded(into: LoadedState, more: LoadedState): void {
  for (const [k, v] of more.requests) into.requests.set(k, v);
  for (const [k, v] of more.conversations) into.conversations.set(k, v);
  for (const [k, v] of more.versions) if (!into.versions.has(k)) into.versions.set(k, v);
  for (const [k, v] of more.endings) into.endings.set(k, v);
  for (const [k, v] of more.passing) into.passing.set(k, v);
  for (const [k, v] of more.labels) into.labels.set(k, v);
}

/** True when two loads saw a conversation at different versions (the state moved between them). */
export function versionsDisagree(a: LoadedState, b: LoadedState): boolean {
  for (const [k, v] of b.versions) {
    const seen = a.versions.get(k);
    if (seen !== undefined && seen !== v) return true;
  }
  return false;
}

export class ConversationView implements ConversationStore {
  readonly missing: MissingKeys = emptyMissing();
  /** Copies of loaded documents, so a commit's in-place edits never touch the loaded data. */
  private readonly readRequests = new Map<string, RequestNode>();
  private readonly readConversations = new Map<string, ConversationInfo>();
  private readonly putRequests = new Map<string, RequestNode>();
  private readonly putConversations = new Map<string, ConversationInfo>();
  private readonly endingsOverlay = new Map<string, string[]>();
  private readonly passingOverlay = new Map<string, PassingEntry>();
  private readonly labelsOverlay = new Map<string, string>();
  private readonly endingOps: Array<[string, string]> = [];
  /** The conversation each written request belonged to when it was read. */
  private readonly formerConversation = new Map<string, string>();

  constructor(private readonly loaded: LoadedState) {}

  request(id: string): RequestNode | undefined {
    const put = this.putRequests.get(id) ?? this.readRequests.get(id);
    if (put) return put;
    const base = this.loaded.requests.get(id);
    if (base === undefined) {
      this.missing.requests.add(id);
      return undefined;
    }
    if (base === null) return undefined;
    const copy = structuredClone(base);
    this.readRequests.set(id, copy);
    return copy;
  }

  putRequest(node: RequestNode): void {
    if (!this.formerConversation.has(node.id)) {
      const before = this.loaded.requests.get(node.id);
      this.formerConversation.set(node.id, before ? before.conversation : node.conversation);
    }
    this.putRequests.set(node.id, node);
  }

  conversation(id: string): ConversationInfo | undefined {
    const put = this.putConversations.get(id) ?? this.readConversations.get(id);
    if (put) return put;
    const base = this.loaded.conversations.get(id);
    if (base === undefined) {
      this.missing.conversations.add(id);
      return undefined;
    }
    if (base === null) return undefined;
    const copy = structuredClone(base);
    this.readConversations.set(id, copy);
    return copy;
  }

  putConversation(info: ConversationInfo): void {
    this.putConversations.set(info.id, info);
  }

  endingAt(transcript: string): readonly string[] {
    const over = this.endingsOverlay.get(transcript);
    if (over) return over;
    const base = this.loaded.endings.get(transcript);
    if (base === undefined) this.missing.endings.add(transcript);
    return base ?? [];
  }

  addEnding(transcript: string, request: string): void {
    // The memory store's rule: the request moves to the end, at most eight kept.
    const list = [...this.endingAt(transcript).filter((r) => r !== request), request];
    this.endingsOverlay.set(transcript, list.length > 8 ? list.slice(-8) : list);
    this.endingOps.push([transcript, request]);
  }

  passingThrough(transcript: string): PassingEntry | undefined {
    const over = this.passingOverlay.get(transcript);
    if (over) return over;
    const base = this.loaded.passing.get(transcript);
    if (base === undefined) this.missing.passing.add(transcript);
    return base ?? undefined;
  }

  addPassing(transcript: string, entry: PassingEntry): void {
    this.passingOverlay.set(transcript, entry);
  }

  labelSeen(label: string): boolean {
    return this.latestOfLabel(label) !== undefined;
  }

  latestOfLabel(label: string): string | undefined {
    const over = this.labelsOverlay.get(label);
    if (over) return over;
    const base = this.loaded.labels.get(label);
    if (base === undefined) this.missing.labels.add(label);
    return base ?? undefined;
  }

  addLabel(label: string, request: string): void {
    this.labelsOverlay.set(label, request);
  }

  /**
   * The state once {@link writes} are applied by a compare-and-swap that succeeded: the loaded data with
   * the writes over it and each checked conversation one version on. Passing entries are left out (they
   * live in shared hashes no invalidation names one by one), so whoever reads them must load them.
   */
  settled(): LoadedState {
    const w = this.writes();
    const out: LoadedState = {
      requests: new Map(this.loaded.requests),
      conversations: new Map(this.loaded.conversations),
      versions: new Map(this.loaded.versions),
      endings: new Map(this.loaded.endings),
      passing: new Map(),
      labels: new Map(this.loaded.labels),
    };
    for (const n of w.requests) out.requests.set(n.id, structuredClone(n));
    for (const c of w.conversations) out.conversations.set(c.id, structuredClone(c));
    for (const [c, v] of w.checks) out.versions.set(c, v + 1);
    for (const [t, list] of this.endingsOverlay) out.endings.set(t, [...list]);
    for (const [l, r] of this.labelsOverlay) out.labels.set(l, r);
    return out;
  }

  /** Everything written since the view was made, with the versions a compare-and-swap must check. */
  writes(): ViewWrites {
    const touched = new Set<string>();
    for (const node of this.putRequests.values()) {
      touched.add(node.conversation);
      const before = this.formerConversation.get(node.id);
      if (before) touched.add(before);
    }
    for (const id of this.putConversations.keys()) touched.add(id);
    return {
      requests: [...this.putRequests.values()],
      conversations: [...this.putConversations.values()],
      checks: [...touched].sort().map((c) => [c, this.loaded.versions.get(c) ?? 0]),
      endings: [...this.endingOps],
      passing: [...this.passingOverlay.entries()],
      labels: [...this.labelsOverlay.entries()],
    };
  }
}
