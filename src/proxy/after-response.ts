// What happens once an exchange is over: wait for its state commit, let a shared state name the
// conversation of a request no fix looked at, write the capture record, hand it to live analysis.
// Runs after the client has its bytes, in slices that yield (work-slices.ts); never throws, never touches traffic.

import type { CaptureRecord } from '../record/capture-record.js';
import type { ProxyState, StateCommit } from '../state/proxy-state.js';
import { formatFromRoute } from '../wire/request-body.js';
import type { ExchangeFacts, ExchangeRecorder } from './exchange-recorder.js';
import type { LiveAnalysis } from './live-analysis.js';
import type { WorkSlices } from './work-slices.js';

/**
 * Below this many body bytes the record and the analysis each run as one step (their pieces back to back),
 * unless a stepped one is half done: a one-step run would first finish it. 256 KB is a few thousand blocks
 * at most, a few ms.
 */
const ONE_STEP_BYTES = 256 * 1024;

export interface AfterResponseDeps {
  recorder: ExchangeRecorder;
  state: ProxyState;
  /** The live view's analysis (none for `wrapFetch`: its app reads the records). */
  live?: LiveAnalysis;
  log: (line: string) => void;
  /** Where the parse, the record and the analysis run: a few ms at a time, between other clients' I/O. */
  slices: WorkSlices;
}

export async function afterResponse(
  deps: AfterResponseDeps,
  facts: ExchangeFacts,
  committing: Promise<StateCommit> | undefined,
): Promise<CaptureRecord | undefined> {
  try {
    const commit = committing ? await committing : undefined;
    if (commit?.note) facts.fixes = [...facts.fixes, commit.note];
    const format = formatFromRoute(facts.route);
    if (!facts.tracked && deps.state.track && format && facts.forwarded.length) {
      await deps.slices.stepped(deps.recorder.parseSteps(facts));
      const prefix = facts.prefix;
      if (prefix) {
        const tracked = await deps.state.track({
          id: facts.id,
          prefix: deps.recorder.chains.whole(prefix).prefix,
          headers: facts.requestHeaders,
          time: facts.start,
          route: facts.route,
          status: facts.status,
        });
        if (tracked) facts.tracked = tracked;
      }
    }
    // The parse, the record and its cause: one after another, each a step of its own, so a slice can stop
    // between them and the analysis never holds up other exchanges.
    // Each runs in pieces (a huge body's parse, record and analysis are cut into many; the parse is a no-op
    // when the tracking above parsed it).
    let record: CaptureRecord | undefined;
    const small = facts.forwarded.length + (facts.client?.length ?? 0) < ONE_STEP_BYTES;
    const parse = deps.recorder.parseSteps(facts);
    let recording: Generator<void, CaptureRecord> | undefined;
    let analysis: Generator<void, unknown> | undefined;
    await deps.slices.series([
      () => parse.next().done !== true,
      () => {
        if (!recording) {
          // An ordinary body is recorded in one step, as fast as before (nothing half done to finish first).
          if (small && !deps.recorder.busy) {
            record = deps.recorder.record(facts);
            return false;
          }
          recording = deps.recorder.recordSteps(facts);
        }
        const r = recording.next();
        if (!r.done) return true;
        record = r.value;
        return false;
      },
      () => {
        const live = deps.live;
        if (!format || !record || !live) return false;
        try {
          if (!analysis) {
            if (small && !live.busy) {
              live.add(record);
              return false;
            }
            analysis = live.addSteps(record);
          }
          return analysis.next().done !== true;
        } catch (err) {
          deps.log(`live analysis of ${facts.id} failed (traffic was not affected): ${String(err)}`);
          return false;
        }
      },
    ]);
    return record;
  } catch (err) {
    deps.log(`capture of ${facts.id} failed (traffic was not affected): ${String(err)}`);
    return undefined;
  }
}
