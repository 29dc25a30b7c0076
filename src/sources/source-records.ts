// Turns the requests an adapter rebuilt into capture records: the body goes through the very prefix-model call
// the proxy's capture makes (PrefixBuilder, then capturePrefix), so every model after it sees one record shape.
// Pure (no I/O, no clock); it keeps no body once the record is made, unless asked to hand it on.

import { LruMap } from '../core/lru-map.js';
import { PrefixBuilder } from '../prefix/build-prefix.js';
import {
  type CapturedBlock,
  type CapturedPrefix,
  type CaptureRecord,
  capturePrefix,
  UNRECORDED_KIND,
} from '../record/capture-record.js';
import { normalizeAnthropicUsage, normalizeOpenAIUsage } from '../wire/usage.js';
import type { SourceRequest } from './source-request.js';

/** Scopes whose unrecorded block size is remembered (one per agent line of a session). */
const SCOPES = 4_096;

/**
 * What the prefix builder keeps to extend each body from: the previous call of each session being read (a
 * report reads few at once; the builder's default is KEPT_BODIES and KEPT_BYTES in prefix/build-prefix.ts).
 */
const KEEP = { bodies: 16, bytes: 8 * 1024 * 1024 };

export class SourceRecords {
  /** Tokens of each scope's unrecorded block: sized once, from its first call with usage. */
  private readonly opaque = new LruMap<number>(SCOPES);

  constructor(private readonly builder: PrefixBuilder = new PrefixBuilder({ keep: KEEP })) {}

  /** The capture record of one rebuilt request (no body in it: the caller decides whether to keep that). */
  record(req: SourceRequest): CaptureRecord {
    const format = req.provider === 'anthropic' ? 'anthropic-messages' : 'openai-responses';
    const record: CaptureRecord = {
      v: 1,
      id: req.id,
      times: req.times,
      session: req.session,
      provider: req.provider,
      route: req.route,
      method: 'POST',
      outcome:
        req.outcome ??
        ((req.status !== undefined && req.status >= 400) || req.error !== undefined ? 'error' : 'complete'),
      stream: true,
      headers: req.headers,
      betas: req.betas,
      requestBytes: req.body.length,
      fixes: [],
    };
    const status = req.status ?? (req.usage ? 200 : undefined);
    if (status !== undefined) record.status = status;
    if (req.error !== undefined) record.error = req.error;
    if (req.model !== undefined) record.model = req.model;
    const normalized = req.usage
      ? req.provider === 'anthropic'
        ? normalizeAnthropicUsage(req.usage)
        : normalizeOpenAIUsage(req.usage)
      : undefined;
    if (req.usage) record.usage = { raw: req.usage, ...(normalized ? { normalized } : {}) };
    if (req.responseId) record.responseId = req.responseId;
    if (req.stopReason) record.stopReason = req.stopReason;
    let prefix: CapturedPrefix;
    try {
      const parsed = this.builder.parse(req.body, {
        format,
        headers: { 'anthropic-beta': req.betas.length ? req.betas.join(',') : undefined },
      });
      prefix = capturePrefix(parsed);
      record.betas = [...parsed.body.betas];
      if (parsed.model) record.model = parsed.model;
    } catch (err) {
      record.parseError = (err as Error).message;
      return record;
    }
    if (req.unrecorded) {
      this.sizeUnrecorded(prefix, req.unrecorded.scope, normalized?.inputTotal);
      prefix.unrecorded = [...req.unrecorded.parts];
    }
    record.prefix = prefix;
    return record;
  }

  /**
   * Sizes the block that stands for the unrecorded parts: what the provider counted beyond the recorded
   * blocks, on the scope's first call with usage, and the same on every later call of the scope (its
   * identity does not change, so neither does its size: a change inside it shows as a miss the cause table
   * places there). The block object is replaced, never changed: earlier records may share it.
   */
  private sizeUnrecorded(prefix: CapturedPrefix, scope: string, inputTotal: number | undefined): void {
    const at = prefix.blocks.findIndex((b) => b.kind === UNRECORDED_KIND);
    const block = prefix.blocks[at];
    if (!block) return;
    let tokens = this.opaque.get(scope);
    if (tokens === undefined && inputTotal !== undefined) {
      tokens = Math.max(0, inputTotal - (prefix.totalTokens - block.tokens));
      this.opaque.set(scope, tokens);
    }
    if (tokens === undefined || tokens === block.tokens) return;
    const sized: CapturedBlock = { ...block, tokens };
    prefix.blocks = prefix.blocks.slice();
    prefix.blocks[at] = sized;
    prefix.totalTokens += tokens - block.tokens;
  }
}
