// What happens once an exchange is over: wait for its state commit, let a shared state name the
// conversation of a request no fix looked at, write the capture record, hand it to live analysis.
// Runs after the client has its bytes; it never throws and never touches traffic.

import type { Prefix, PrefixBuilder } from '../prefix/build-prefix.js';
import type { ProxyState, StateCommit } from '../state/proxy-state.js';
import { formatFromRoute } from '../wire/request-body.js';
import type { ExchangeFacts, ExchangeRecorder } from './exchange-recorder.js';
import type { LiveAnalysis } from './live-analysis.js';

export interface AfterResponseDeps {
  recorder: ExchangeRecorder;
  builder: PrefixBuilder;
  state: ProxyState;
  live: LiveAnalysis;
  log: (line: string) => void;
}

export async function afterResponse(
  deps: AfterResponseDeps,
  facts: ExchangeFacts,
  committing: Promise<StateCommit> | undefined,
): Promise<void> {
  try {
    const commit = committing ? await committing : undefined;
    if (commit?.note) facts.fixes = [...facts.fixes, commit.note];
    const format = formatFromRoute(facts.route);
    if (!facts.tracked && deps.state.track && format && facts.forwarded.length) {
      let prefix: Prefix | undefined = facts.prefix;
      try {
        prefix ??= deps.builder.parse(facts.forwarded, {
          format,
          headers: { 'anthropic-beta': facts.requestHeaders.get('anthropic-beta') ?? undefined },
        });
      } catch {
        // Not a body the model can read: the recorder says why.
      }
      if (prefix) {
        facts.prefix = prefix;
        const tracked = await deps.state.track(
          facts.id,
          deps.recorder.chains.whole(prefix).prefix,
          facts.requestHeaders,
          facts.start,
          facts.route,
          facts.status,
        );
        if (tracked) facts.tracked = tracked;
      }
    }
    const record = deps.recorder.record(facts);
    // Its cause, in a later turn of the event loop: the analysis never holds up other exchanges.
    if (format)
      setImmediate(() => {
        try {
          deps.live.add(record);
        } catch (err) {
          deps.log(`live analysis of ${facts.id} failed (traffic was not affected): ${String(err)}`);
        }
      });
  } catch (err) {
    deps.log(`capture of ${facts.id} failed (traffic was not affected): ${String(err)}`);
  }
}
