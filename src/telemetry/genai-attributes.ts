// The attributes of one analyzed request, as OpenTelemetry's GenAI semantic conventions name them, plus
// cacheward's own (session, conversation, relation, miss cause, re-written tokens, waste, fixes). Pure
// mapping from the analyzer's row and the capture record; it never computes a cause or reads a clock.

import type { AnalyzedRequest } from '../analyze/analyze-captures.js';
import { describeMiss } from '../analyze/describe-miss.js';
import { capLabel } from '../core/cap-label.js';
import { fixChanged } from '../fixes/fix-note.js';
import type { CaptureRecord } from '../record/capture-record.js';

/** One finished request as telemetry exports it: its record and the analyzer's row (what the live view hands on). */
export interface ExportedRequest {
  record: CaptureRecord;
  analyzed: AnalyzedRequest;
}

export type AttributeValue = string | number | boolean | string[];
export type Attributes = Record<string, AttributeValue>;

/** The span's name, kind-free: `{gen_ai.operation.name} {gen_ai.request.model}`. */
export function spanName(e: ExportedRequest): string {
  return e.record.model ? `chat ${capLabel(e.record.model)}` : 'chat';
}

/** Whether a request is one the conventions describe (a chat call; count_tokens is not). */
export function isChatCall(e: ExportedRequest): boolean {
  return !e.record.route.includes('count_tokens');
}

/** The upstream a request went to, as the conventions name it: host and port. */
export interface ServerAddress {
  address: string;
  port: number;
}

/** `server.address` and `server.port` of an upstream base URL (the scheme's default port when it names none). */
export function serverAddress(base: string): ServerAddress | undefined {
  try {
    const u = new URL(base);
    return {
      address: u.hostname.replace(/^\[|\]$/g, ''),
      port: u.port ? Number(u.port) : u.protocol === 'https:' ? 443 : 80,
    };
  } catch {
    return undefined;
  }
}

export function spanAttributes(e: ExportedRequest, server?: ServerAddress): Attributes {
  const { record: r, analyzed: a } = e;
  const out: Attributes = {
    'gen_ai.operation.name': 'chat',
    'gen_ai.provider.name': r.provider,
    'cacheward.request.id': r.id,
    'cacheward.outcome': r.outcome,
    'url.path': r.route,
  };
  if (server) {
    out['server.address'] = server.address;
    out['server.port'] = server.port;
  }
  if (r.model) out['gen_ai.request.model'] = capLabel(r.model);
  if (r.maxTokens !== undefined) out['gen_ai.request.max_tokens'] = r.maxTokens;
  if (r.responseModel) out['gen_ai.response.model'] = capLabel(r.responseModel);
  if (r.responseId) out['gen_ai.response.id'] = r.responseId;
  if (r.stopReason) out['gen_ai.response.finish_reasons'] = [r.stopReason];
  if (r.status !== undefined) out['http.response.status_code'] = r.status;
  const u = a.usage;
  if (u) {
    out['gen_ai.usage.input_tokens'] = u.inputTotal;
    out['gen_ai.usage.output_tokens'] = u.output;
    if (u.cacheReported) {
      out['gen_ai.usage.cache_read.input_tokens'] = u.cacheRead;
      out['gen_ai.usage.cache_creation.input_tokens'] = u.cacheWrite;
    }
  }
  // The session label the client sent (none: the conversation stands for it).
  const labelled = !['conversation', 'lineage', 'none'].includes(r.session.source);
  if (labelled) out['cacheward.session.label'] = capLabel(r.session.key);
  out['cacheward.session'] = capLabel(a.session);
  out['gen_ai.conversation.id'] = a.conversation;
  out['cacheward.conversation.id'] = a.conversation;
  out['cacheward.conversation.relation'] = a.relation;
  out['cacheward.conversation.turn'] = a.turn;
  if (a.fork) out['cacheward.conversation.fork_of'] = a.fork.parent;
  if (a.concurrent) out['cacheward.concurrent'] = true;
  out['cacheward.cache.miss'] = a.miss !== undefined;
  if (a.miss) {
    out['cacheward.miss.cause'] = a.miss.cause;
    out['cacheward.miss.rewritten_tokens'] = a.miss.rewrittenTokens;
    if (a.miss.waste !== null) out['cacheward.miss.waste_usd'] = a.miss.waste;
    out['cacheward.miss.description'] = a.miss.sentence || describeMiss(a.miss);
    if (a.miss.parentId) out['cacheward.miss.parent_request'] = a.miss.parentId;
  }
  if (a.expectedRead !== undefined) out['cacheward.cache.expected_read_tokens'] = a.expectedRead;
  if (a.cost) out['cacheward.cost_usd'] = a.cost.total;
  // The model has no price row of its own: the cost is priced from this (its family's nearest) row.
  if (a.pricedAs) out['cacheward.price.priced_as'] = a.pricedAs;
  out['cacheward.fixes.applied'] = r.fixes.filter(fixChanged).map((f) => f.fix);
  const failed = r.fixes.filter((f) => f.error).map((f) => f.fix);
  if (failed.length) out['cacheward.fixes.failed'] = failed;
  const state = r.fixes.find((f) => f.fix === 'state');
  if (state) out['cacheward.state.note'] = state.notes.join('; ');
  return out;
}
