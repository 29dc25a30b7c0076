// One exchange from request to record, for the proxy and wrapFetch alike: fix stage, refusal, commit, facts.
// It never sends or reads a byte itself, and never alters a request no fix asked to change.

import type { TrackedRequest } from '../conversation/conversation-tracker.js';
import type { Fix } from '../fixes/fix.js';
import type { FixNote } from '../fixes/fix-note.js';
import { afterRefusal, refusedNotes } from '../fixes/withdrawal.js';
import type { Prefix, PrefixBuilder } from '../prefix/build-prefix.js';
import type { RequestFixState } from '../state/fix-state-codec.js';
import type { PreparedRequest, ProxyState, StateCommit } from '../state/proxy-state.js';
import type { WireFormat } from '../wire/request-body.js';
import type { ExchangeFacts, ExchangeRecorder } from './exchange-recorder.js';
import type { FixRefusals } from './fix-refusals.js';
import { type FixedRequest, fixRequest } from './fix-request.js';
import type { ForwardFacts } from './forward-upstream.js';

/** What every exchange of one proxy (or one wrapped fetch) shares. */
export interface ExchangeDeps {
  log: (line: string) => void;
  fixes: readonly Fix[];
  builder: PrefixBuilder;
  state: ProxyState;
  recorder: ExchangeRecorder;
  /** Fixed requests the provider refused, by fix (for the health endpoint). */
  refusals?: FixRefusals;
}

/** The request, as known before its body is read. */
export interface ExchangeRequest {
  id: string;
  provider: 'anthropic' | 'openai';
  /** The model route's format; undefined for a route that carries no prompt. */
  format: WireFormat | undefined;
  route: string;
  method: string;
  start: number;
  /** The request's headers (built when first asked for). */
  requestHeaders(): Headers;
}

/** A fixed request's client bytes, and what to do when the provider refuses the fixed form. */
export interface Unfixed {
  body: Buffer;
  refused(status: number, message: string): void;
}

export class Exchange {
  /** What goes out when the fix stage read the body: the fixed bytes, or the client's own. */
  body: Buffer | undefined;
  /** Headers a fix changed (and the fixed body's length). */
  headerOverride: Record<string, string> | undefined;
  /** Set when a fix changed the request: the client's own bytes, sent once if the provider refuses. */
  unfixed: Unfixed | undefined;
  private clientBody: Buffer | undefined;
  private notes: FixNote[] = [];
  private prefix: Prefix | undefined;
  private tracked: TrackedRequest | undefined;
  private prepared: PreparedRequest | undefined;
  private after: RequestFixState | undefined;
  private committing: Promise<StateCommit> | undefined;

  constructor(
    private readonly deps: ExchangeDeps,
    readonly request: ExchangeRequest,
  ) {}

  /** Whether the fix stage reads this request's body (fixes are on and the route carries a prompt). */
  get fixing(): boolean {
    return this.deps.fixes.length > 0 && this.request.format !== undefined;
  }

  /** Runs the fix stage on the client's body, read whole: parsed once, its conversation resolved once. */
  async fix(original: Buffer): Promise<void> {
    const { deps, request } = this;
    this.body = original;
    let fixed: FixedRequest;
    try {
      fixed = await fixRequest(
        {
          fixes: deps.fixes,
          builder: deps.builder,
          state: deps.state,
          log: deps.log,
          chains: deps.recorder.chains,
        },
        {
          id: request.id,
          original,
          format: request.format as WireFormat,
          provider: request.provider,
          route: request.route,
          requestHeaders: request.requestHeaders(),
          start: request.start,
        },
      );
    } catch (err) {
      // Whatever failed (the state's answer included), the client's bytes go out as they came.
      deps.log(`fix stage failed for ${request.id}; the original request went out: ${String(err)}`);
      this.notes = [
        { fix: 'pipeline', changed: false, notes: ['skipped: the fix stage failed'], error: String(err) },
      ];
      return;
    }
    this.take(fixed);
  }

  private take(fixed: FixedRequest): void {
    this.body = fixed.forwarded;
    this.clientBody = fixed.client;
    this.notes = fixed.notes;
    this.prefix = fixed.prefix;
    this.headerOverride = fixed.headerOverride;
    this.prepared = fixed.prepared;
    this.after = fixed.after;
    this.tracked = fixed.prepared?.tracked;
    const { client, clientPrefix } = fixed;
    if (client && clientPrefix)
      this.unfixed = { body: client, refused: (s, m) => this.refused(s, m, client, clientPrefix) };
  }

  /**
   * The provider refused the fixed form: the client's own bytes go out, and what is committed, captured and
   * counted is that (the fixes that changed the request withdrawn for the conversation on this model).
   */
  private refused(status: number, message: string, client: Buffer, clientPrefix: Prefix): void {
    const { fixes, refusals, log } = this.deps;
    const names = this.notes
      .filter((n) => n.changed && fixes.some((f) => f.name === n.fix))
      .map((n) => n.fix);
    const model = clientPrefix.model;
    this.notes = refusedNotes(this.notes, names, { status, message }, model);
    if (this.after) this.after = afterRefusal(this.after, names, model, clientPrefix);
    this.body = client;
    this.clientBody = undefined;
    this.prefix = clientPrefix;
    refusals?.add(names);
    log(
      `fix ${names.join(', ')} refused by the provider (${status}: ${message}); the client's own request was sent instead, and ${names.length === 1 ? 'that fix is' : 'those fixes are'} off for this conversation on ${model || 'this model'}`,
    );
  }

  /** The upstream's status is known: a state that commits at the status commits now (`commitAt`). */
  statusKnown(status: number): void {
    if (this.deps.state.commitAt === 'status') this.commit(status);
  }

  /** The response is about to end: every state has its commit started by now (not waited for). */
  ending(status: number): void {
    this.commit(status);
  }

  /** Commits the request to the state (once; a later call does nothing). */
  commit(status: number | undefined): void {
    if (this.prepared && !this.committing)
      this.committing = this.deps.state.commit(this.prepared, this.request.route, status, this.after);
  }

  /** The commit under way, if any (the record waits for it). */
  get pendingCommit(): Promise<StateCommit> | undefined {
    return this.committing;
  }

  /**
   * The exchange is over: commits it as it is if no status came, and gives the facts its record is made of.
   * `forwarded` is what went out when the fix stage did not read the body (the tapped chunks).
   */
  facts(forwarded: Buffer, end: number, facts: ForwardFacts): ExchangeFacts {
    this.commit(facts.status);
    const { request } = this;
    // Keys set in order, then the forward's facts assigned (a spread followed by more keys, or of `facts`
    // after them, takes Node 20's slower path). The same object.
    const exchange: ExchangeFacts = {
      id: request.id,
      provider: request.format ? request.provider : ('unknown' as const),
      route: request.route,
      method: request.method,
      requestHeaders: request.requestHeaders(),
      forwarded: this.body ?? forwarded,
    } as ExchangeFacts;
    if (this.clientBody) exchange.client = this.clientBody;
    if (this.prefix) exchange.prefix = this.prefix;
    if (this.tracked) exchange.tracked = this.tracked;
    exchange.fixes = this.notes;
    exchange.start = request.start;
    exchange.end = end;
    Object.assign(exchange, facts);
    return exchange;
  }
}
