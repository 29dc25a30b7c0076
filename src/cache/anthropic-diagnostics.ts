// Anthropic cache diagnostics (beta cache-diagnosis-2026-04-07): compares a request with the one a
// previous message id names and reports the first structural divergence. Pure: times are passed in.

import type { Prefix } from '../prefix/build-prefix.js';
import { stableJson } from '../prefix/stable-json.js';
import { ExpiringRecords } from './expiring-records.js';

export const CACHE_DIAGNOSIS_BETA = 'cache-diagnosis-2026-04-07';

/** The `cache_miss_reason` of a response, or null when nothing diverged. */
export type AnthropicMissReason =
  | {
      type: 'model_changed' | 'system_changed' | 'tools_changed' | 'messages_changed';
      cache_missed_input_tokens: number;
    }
  | { type: 'previous_message_not_found' | 'unavailable' };

/** What is kept of a request to compare the next one with: keys and sizes, no text. */
interface Fingerprint {
  /** The workspace it came from (an API-key hash in the simulator): fingerprints are scoped to it. */
  scope: string;
  model: string | undefined;
  toolsEnd: string;
  systemEnd: string;
  params: string;
  messageKeys: string[];
}

function endOf(prefix: Prefix, level: 'tools' | 'system'): string {
  const l = prefix.levels[level];
  return l.end > l.start ? (prefix.blocks[l.end - 1]?.hash ?? l.foldHash) : l.foldHash;
}

function fingerprint(prefix: Prefix, scope: string): Fingerprint {
  const { images: _images, ...params } = prefix.levels.messages.params;
  const m = prefix.levels.messages;
  return {
    scope,
    model: prefix.model,
    toolsEnd: endOf(prefix, 'tools'),
    systemEnd: endOf(prefix, 'system'),
    params: stableJson(params),
    messageKeys: prefix.blocks.slice(m.start, m.end).map((b) => b.hash),
  };
}

/** Options for {@link AnthropicDiagnostics}. */
export interface AnthropicDiagnosticsOptions {
  /** How long a message's fingerprint is kept. Model choice: 1 hour. */
  retentionMs?: number;
  /** At most this many fingerprints (oldest go first). Default 100,000. */
  maxRecords?: number;
}

/** Remembers requests by response id and answers `diagnostics` for the next turn. */
export class AnthropicDiagnostics {
  private readonly records: ExpiringRecords<Fingerprint>;

  constructor(options: AnthropicDiagnosticsOptions = {}) {
    this.records = new ExpiringRecords(options.retentionMs ?? 60 * 60_000, options.maxRecords ?? 100_000);
  }

  /** Keeps the request that produced response `id`, sent from workspace `scope`. */
  remember(id: string, prefix: Prefix, now: number, scope = ''): void {
    this.records.set(id, fingerprint(prefix, scope), now);
  }

  clear(): void {
    this.records.clear();
  }

  /**
   * The response's `diagnostics` for a request that asked with `previous_message_id` (`null` on a first
   * turn): null when nothing diverged, else `{ cache_miss_reason }`. A fingerprint from another workspace
   * is not found ("scoped to your organization and workspace", cache-diagnostics.md).
   */
  compare(
    previousId: string | null,
    prefix: Prefix,
    now: number,
    scope = '',
  ): { cache_miss_reason: AnthropicMissReason } | null {
    if (previousId === null) return null;
    const prev = this.records.get(previousId, now);
    if (!prev || prev.scope !== scope) return { cache_miss_reason: { type: 'previous_message_not_found' } };
    const cur = fingerprint(prefix, scope);
    const missedFrom = (blockIndex: number) =>
      prefix.totalTokens - (prefix.blocks[blockIndex - 1]?.cumulativeTokens ?? 0);
    const changed = (
      type: 'model_changed' | 'system_changed' | 'tools_changed' | 'messages_changed',
      at: number,
    ) => ({
      cache_miss_reason: { type, cache_missed_input_tokens: missedFrom(at) },
    });
    if (prev.model !== cur.model) return changed('model_changed', 0);
    if (prev.toolsEnd !== cur.toolsEnd) return changed('tools_changed', prefix.levels.tools.start);
    if (prev.systemEnd !== cur.systemEnd) return changed('system_changed', prefix.levels.system.start);
    if (prev.params !== cur.params) return { cache_miss_reason: { type: 'unavailable' } };
    const n = prev.messageKeys.length;
    if (n === 0) return null;
    if (cur.messageKeys.length >= n && cur.messageKeys[n - 1] === prev.messageKeys[n - 1]) return null;
    let i = 0;
    while (i < n && cur.messageKeys[i] === prev.messageKeys[i]) i++;
    return changed('messages_changed', prefix.levels.messages.start + i);
  }
}
