// The proxy's fix path for one request read whole: parse once, ask the state for its conversation and its
// parent's fix state, run the fix stage. Fails open: unparseable or no state in time means the client's bytes.

import { runStepped } from '../core/stepped-work.js';
import type { Fix } from '../fixes/fix.js';
import { runFixStageSteps } from '../fixes/fix-stage.js';
import type { Prefix, PrefixBuilder } from '../prefix/build-prefix.js';
import type { FixNote } from '../record/capture-record.js';
import type { RequestFixState } from '../state/fix-state-codec.js';
import { type PreparedRequest, type ProxyState, unavailableNote } from '../state/proxy-state.js';
import type { WireFormat } from '../wire/request-body.js';
import type { ResponseChains } from './response-chains.js';

export interface FixRequestInput {
  id: string;
  original: Buffer;
  format: WireFormat;
  provider: 'anthropic' | 'openai';
  route: string;
  requestHeaders: Headers;
  start: number;
}

/** What goes upstream, and what the commit and the capture need to know. */
export interface FixedRequest {
  forwarded: Buffer;
  /** The client's bytes, when a fix changed them. */
  client?: Buffer;
  /** The client's body's prefix, when a fix changed it (what goes out if the provider refuses the fix). */
  clientPrefix?: Prefix;
  notes: FixNote[];
  /** The forwarded body's prefix (absent when the body could not be parsed). */
  prefix?: Prefix;
  headerOverride?: Record<string, string>;
  /** The state's answer, to commit once the upstream's status is known. */
  prepared?: PreparedRequest;
  after?: RequestFixState;
}

export async function fixRequest(
  deps: {
    fixes: readonly Fix[];
    builder: PrefixBuilder;
    state: ProxyState;
    log: (line: string) => void;
    /** Responses chains: a chained request is resolved as the whole conversation it continues. */
    chains?: ResponseChains;
  },
  input: FixRequestInput,
): Promise<FixedRequest> {
  const { builder } = deps;
  const { format } = input;
  const original = input.original;
  let clientPrefix: Prefix;
  try {
    // In pieces with the event loop given back between them: a huge body never stalls other streams.
    clientPrefix = await runStepped(
      builder.parseSteps(original, {
        format,
        headers: { 'anthropic-beta': input.requestHeaders.get('anthropic-beta') ?? undefined },
      }),
    );
  } catch (err) {
    // The body is not a request the fixes can read: it goes out exactly as received.
    return {
      forwarded: original,
      notes: [
        {
          fix: 'pipeline',
          changed: false,
          notes: ['skipped: the body could not be parsed'],
          error: String(err),
        },
      ],
    };
  }
  const seen = deps.chains?.whole(clientPrefix).prefix ?? clientPrefix;
  const ready = await deps.state.prepare(input.id, seen, input.requestHeaders, input.start);
  if (!ready.ok) return { forwarded: original, prefix: clientPrefix, notes: [unavailableNote(ready)] };
  try {
    const res = ready.tracked.resolution;
    const headersIn: Record<string, string> = {};
    input.requestHeaders.forEach((v, k) => {
      if (k === 'anthropic-beta') headersIn[k] = v;
    });
    const parseOptions = (h: Readonly<Record<string, string>>) => ({
      format,
      headers: { 'anthropic-beta': h['anthropic-beta'] },
    });
    // In pieces too (its re-parses of the fixed body yield), with the event loop given back between them.
    const out = await runStepped(
      runFixStageSteps({
        fixes: deps.fixes,
        body: original,
        prefix: clientPrefix,
        headers: headersIn,
        states: ready.states,
        context: {
          provider: input.provider,
          route: input.route,
          now: input.start,
          conversation: res.conversation,
          relation: res.relation,
          ...(ready.tracked.label ? { label: ready.tracked.label.key } : {}),
        },
        ...(ready.parentPair ? { parent: ready.parentPair } : {}),
        reparse: (b, h) => builder.parse(b, parseOptions(h)),
        reparseSteps: (b, h) => builder.parseSteps(b, parseOptions(h)),
      }),
    );
    for (const n of out.notes)
      if (n.error) deps.log(`fix ${n.fix} failed; the original request went out: ${n.error}`);
    const fixed: FixedRequest = {
      forwarded: original,
      notes: out.notes,
      prefix: out.prefix,
      prepared: ready,
      after: { states: out.states, pair: { client: clientPrefix.blocks, forwarded: out.prefix.blocks } },
    };
    if (out.changed) {
      fixed.client = original;
      fixed.clientPrefix = clientPrefix;
      fixed.forwarded = out.body;
      fixed.headerOverride = { ...out.headers, 'content-length': String(out.body.length) };
    }
    // Once the request is on its way upstream (the next turn of the event loop), the commit is built.
    const after = fixed.after;
    if (deps.state.stage) setImmediate(() => deps.state.stage?.(ready, after));
    return fixed;
  } catch (err) {
    return {
      forwarded: original,
      notes: [
        { fix: 'pipeline', changed: false, notes: ['skipped: the fix stage failed'], error: String(err) },
      ],
    };
  }
}
